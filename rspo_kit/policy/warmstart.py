"""SFT warm start end to end: demonstrations -> SFT -> checkpoint -> evaluation (greedy and pass@k).

    python -m rspo_kit.policy.warmstart --env alfworld --preset tiny --demo-tasks 400 --minutes 8
    python -m rspo_kit.policy.warmstart --env webshop --demo-tasks 1500 --updates 1284  # machine-independent
    python -m rspo_kit.policy.warmstart --env alfworld --updates 1536 --exclude-kinds look_at_obj_in_light

Writes ``<out>/policy/`` (safetensors + tokenizer) and ``<out>/warmstart.json`` (demonstration
stats, SFT loss curve, evaluation results with 95% intervals). ``--exclude-kinds`` leaves task kinds
out of the demonstrations (``rspo_kit.policy.sft.demonstration_tasks``); the evaluation still covers
every kind and reports the success on the kinds left out apart from the rest. ``--env-module M``
(repeatable) imports a module whose ``register_env`` calls define ``--env`` (a user's env: a scratch
preset then starts with that env's text in its tokenizer, as a training run's does).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.registry import (
    ENV_MODULE_HELP,
    EnvModuleError,
    UnknownEnvError,
    load_env_modules,
    require_env,
)
from rspo_kit.policy.evaluate import evaluate
from rspo_kit.policy.models import preset_for, weights_digest
from rspo_kit.policy.rollout import Policy
from rspo_kit.policy.sft import SFTConfig, demonstration_tasks, save_policy, warm_start


def kinds_success(per_kind: dict[str, dict[str, float]], kinds: Sequence[str]) -> float:
    """The success over the episodes of ``kinds`` in an evaluation's ``per_kind`` table; NaN if none.

    >>> kinds_success({"a": {"episodes": 2, "success": 0.5}, "b": {"episodes": 6, "success": 0.0}}, ["a", "b"])
    0.125
    """
    rows = [per_kind[k] for k in kinds if k in per_kind]
    episodes = sum(r["episodes"] for r in rows)
    return sum(r["success"] * r["episodes"] for r in rows) / episodes if episodes else math.nan


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--env-module", action="append", default=[], metavar="MODULE", help=ENV_MODULE_HELP)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--mode", choices=("choice", "free"), default=None)
    ap.add_argument("--init", default=None, help="start from this checkpoint instead of the fresh preset")
    ap.add_argument("--demo-tasks", type=int, default=400)
    ap.add_argument(
        "--exclude-kinds",
        default="",
        metavar="KIND[,KIND]",
        help="task kinds the demonstrations leave out (Task.kind, e.g. look_at_obj_in_light); the "
        "evaluation reports them apart",
    )
    ap.add_argument("--p-detour", type=float, default=0.15)
    ap.add_argument(
        "--minutes", type=float, default=None, help="SFT time budget (default 8 without --updates)"
    )
    ap.add_argument(
        "--updates",
        type=int,
        default=None,
        help="SFT updates instead of a time budget: the same schedule on any machine",
    )
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--choice-weight", type=float, default=1.0, help="candidate cross-entropy (choice mode)")
    ap.add_argument(
        "--balance", type=float, default=0.5, help="verb-balanced sample weights: freq ** -balance"
    )
    ap.add_argument(
        "--dagger-rounds", type=int, default=0, help="DAgger rounds: the policy acts, the teacher labels"
    )
    ap.add_argument("--dagger-tasks", type=int, default=100, help="train tasks per DAgger round")
    ap.add_argument("--eval-n", type=int, default=60)
    ap.add_argument("--pass-n", type=int, default=30, help="tasks for pass@8")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default=None, help="ALFWorld engine: alfworld (real) or native (fast)")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch threads for evaluating (SFT trains on one)"
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.minutes is None and args.updates is None:
        args.minutes = 8.0
    try:
        load_env_modules(args.env_module)  # before anything builds the env: a wrong one fails at once
        require_env(args.env)
    except (EnvModuleError, UnknownEnvError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    excluded = [k.strip() for k in args.exclude_kinds.split(",") if k.strip()]
    try:
        tasks = demonstration_tasks(args.env, args.demo_tasks, excluded)
    except ValueError as err:  # before the model loads: a misspelt kind fails at once
        ap.error(f"--exclude-kinds: {err}")

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = Path(args.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}_warmstart_{args.env}_{args.preset}")
    out.mkdir(parents=True, exist_ok=True)
    start = args.init or preset_for(args.preset, args.env, args.seed)  # a user env's text in the tokenizer
    policy = Policy.load(start, mode=args.mode, seed=args.seed)
    report: dict = {"args": vars(args), "params": sum(p.numel() for p in policy.model.parameters())}

    env_kwargs = {"engine": args.engine} if args.engine else {}
    cfg = SFTConfig(
        lr=args.lr,
        batch_size=args.batch_size,
        epochs=args.epochs,
        time_budget_s=None if args.minutes is None else 60 * args.minutes,
        max_updates=args.updates,
        choice_weight=args.choice_weight,
        balance=args.balance,
        dagger_rounds=args.dagger_rounds,
        dagger_tasks=args.dagger_tasks,
    )
    t0 = time.perf_counter()
    with BatchRunner(args.env, n_workers=2, env_kwargs=env_kwargs) as runner:
        report.update(warm_start(policy, runner, tasks, cfg, args.p_detour, args.seed))
    report["seconds"] = time.perf_counter() - t0
    report["weights_sha256"] = weights_digest(policy.model)  # two builds are one policy iff they match
    save_policy(policy, out / "policy")
    (out / "warmstart.json").write_text(json.dumps(report, indent=1))

    kwargs = {"n_workers": 2, "max_steps": args.max_steps, "env_kwargs": env_kwargs}
    report["eval_greedy"] = evaluate(policy, args.env, "eval", args.eval_n, greedy=True, **kwargs).to_dict()
    (out / "warmstart.json").write_text(json.dumps(report, indent=1))  # nothing lost if pass@8 is cut short
    report["eval_pass8"] = evaluate(
        policy, args.env, "eval", args.pass_n, samples=8, greedy=False, **kwargs
    ).to_dict()
    (out / "warmstart.json").write_text(json.dumps(report, indent=1))
    g, s = report["eval_greedy"], report["eval_pass8"]
    print(
        f"{args.preset} ({policy.mode}) on {args.env} eval: greedy {100 * g['success']:.1f}% "
        f"[{100 * g['ci_low']:.1f}, {100 * g['ci_high']:.1f}] over {g['tasks']} tasks, invalid {100 * g['invalid_share']:.1f}%; "
        f"sampled {100 * s['success']:.1f}%, pass@8 {100 * s['pass_at_k']:.1f}% over {s['tasks']} tasks"
    )
    if excluded:
        seen = sorted(set(g["per_kind"]) - set(excluded))
        print(
            f"greedy / sampled success on the kinds left out: {100 * kinds_success(g['per_kind'], excluded):.1f}% / "
            f"{100 * kinds_success(s['per_kind'], excluded):.1f}%; on the kinds demonstrated: "
            f"{100 * kinds_success(g['per_kind'], seen):.1f}% / {100 * kinds_success(s['per_kind'], seen):.1f}%"
        )
    print(f"results: {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
