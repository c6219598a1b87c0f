"""``python -m rspo_kit.evaluate --policy runs/x --env alfworld --n 60 [--samples 8] [--episodes out.csv]``

Prints the evaluation (success with its 95% interval, per task type, pass@k) as JSON. With
``--teacher-forced`` it prints instead, per verb, the accuracy in the teacher's states and the
probability that sampling takes the teacher's action (``rspo_kit.policy.evaluate.teacher_forced_accuracy``).
``--env-module M`` (repeatable) imports a module of one's own whose ``register_env`` calls define the
env that ``--env`` names; a module that does not load, or an unknown env, is one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rspo_kit.envs.registry import (
    ENV_MODULE_HELP,
    EnvModuleError,
    UnknownEnvError,
    load_env_modules,
    require_env,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.evaluate", description="Evaluate a policy on a fixed split"
    )
    ap.add_argument(
        "--policy",
        required=True,
        help="preset name, saved policy folder, or a training run's folder (its actor)",
    )
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--env-module", action="append", default=[], metavar="MODULE", help=ENV_MODULE_HELP)
    ap.add_argument("--split", default="eval")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--sampled", action="store_true", help="sample actions (default: greedy)")
    ap.add_argument(
        "--epsilon",
        type=float,
        default=0.0,
        help="with --sampled: a share of the choices uniform among the candidates (an ε-explorer's sampling)",
    )
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--episodes", default=None, help="also write every episode's outcome to this CSV file")
    ap.add_argument(
        "--teacher-forced",
        action="store_true",
        help="per-verb accuracy (and sampling probability of the teacher's action) in the teacher's states",
    )
    ap.add_argument(
        "--on-policy", action="store_true", help="with --teacher-forced: agreement in the policy's own states"
    )
    args = ap.parse_args(argv)
    if args.epsilon and not args.sampled:
        print(
            f"error: --epsilon {args.epsilon} mixes uniform choices into sampling: add --sampled",
            file=sys.stderr,
        )
        return 2
    try:
        load_env_modules(args.env_module)  # before the policy loads: a wrong env fails at once
        require_env(args.env)
    except (EnvModuleError, UnknownEnvError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    from rspo_kit.policy.evaluate import evaluate, teacher_forced_accuracy
    from rspo_kit.policy.models import preset_for
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.records.metrics import METRICS_FILE

    folder = Path(args.policy)
    try:
        if (folder / METRICS_FILE).exists() or (folder / "latest").exists():  # a training run: its actor
            from rspo_kit.train.setup import trained_actor

            policy = trained_actor(args.policy)
        else:
            policy = Policy.load(preset_for(args.policy, args.env))  # a scratch preset: the env's tokenizer
    except (ValueError, OSError) as err:  # a damaged folder (RecordError, CheckpointError) or none
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.teacher_forced:
        follow = "policy" if args.on_policy else "teacher"
        print(
            json.dumps(teacher_forced_accuracy(policy, args.env, args.split, args.n or 30, follow), indent=1)
        )
        return 0
    result = evaluate(
        policy,
        args.env,
        args.split,
        args.n,
        samples=args.samples,
        greedy=not args.sampled,
        seed=args.seed,
        max_steps=args.max_steps,
        env_kwargs={"engine": args.engine} if args.engine else None,
        epsilon=args.epsilon,
    )
    if args.episodes:
        import pandas as pd

        Path(args.episodes).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(result.episodes).to_csv(args.episodes, index=False)
    print(json.dumps(result.to_dict(episodes=False), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
