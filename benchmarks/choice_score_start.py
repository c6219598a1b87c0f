"""Does an untrained choice-mode policy explore? Summed against mean token log-prob scoring.

An untrained tiny policy spreads its next-token probability over the whole vocabulary, so under
``policy.choice_score="sum"`` every extra token of a candidate costs about log V: the softmax over
candidates all but always picks the shortest one, and a run starting there samples one action. This
script plays sampled episodes of the untrained tiny preset (no warm start) with each scoring and
reports, over all steps: the mean entropy of the candidate distribution that was sampled from (nats,
and as a share of the uniform distribution's log C), the share of steps that chose a shortest
candidate (by tokens) beside the share a uniform choice would give, and the success rate.

Envs: ``alfworld`` (native engine, train tasks) and ``dial``, the two-digit combination lock of
``tests/lock_env.py`` (three equally long candidates: there the scoring changes only the sharpness).

    .venv/bin/python benchmarks/choice_score_start.py [--envs alfworld,dial] [--seeds 0,1,2] [--tasks 16] [--group 4] [--temperature 1.0] [--max-steps 30]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def choice_statistics(policy, trajs, temperature: float, chunk: int = 64) -> dict[str, float]:
    """Mean candidate entropy (nats and normalised), shortest-candidate share (and chance), success."""
    from rspo_kit.policy.step_scores import score_steps

    steps = [s for t in trajs for s in t.steps if s.candidates and len(s.candidates) > 1]
    entropy, normalised, shortest, chance = [], [], [], []
    with torch.no_grad():
        for i in range(0, len(steps), chunk):
            part = steps[i : i + chunk]
            for s, h in zip(part, score_steps(policy, part, temperature).entropy, strict=True):
                lengths = [len(c) for c in s.candidates]
                entropy.append(float(h))
                normalised.append(float(h) / math.log(len(lengths)))
                shortest.append(lengths[s.chosen] == min(lengths))
                chance.append(lengths.count(min(lengths)) / len(lengths))
    n = max(1, len(steps))
    return {
        "steps": len(steps),
        "entropy_nats": sum(entropy) / n,
        "entropy_share_of_uniform": sum(normalised) / n,
        "shortest_share": sum(shortest) / n,
        "shortest_share_if_uniform": sum(chance) / n,
        "success": sum(t.won for t in trajs) / max(1, len(trajs)),
    }


def measure(env: str, score: str, seed: int, n_tasks: int, group: int, temperature: float, max_steps: int):
    from rspo_kit.envs import list_tasks
    from rspo_kit.envs.batch import BatchRunner
    from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout

    policy = replace(Policy.load("tiny", mode="choice", seed=seed), choice_score=score)
    tasks = list_tasks(env, split="train", n=n_tasks)
    kwargs = {"max_steps": max_steps} if env == "alfworld" else {}
    with BatchRunner(env, n_workers=0, env_kwargs=kwargs) as runner:
        trajs = rollout(policy, runner, tasks, RolloutConfig(group, temperature), seed=seed)
    return choice_statistics(policy, trajs, temperature)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="alfworld,dial")
    parser.add_argument("--seeds", default="0,1,2", help="initialisations of the untrained tiny model")
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--group", type=int, default=4, help="episodes per task")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=30, help="ALFWorld's episode cap")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT / "tests"))
    from lock_env import register_lock

    register_lock()
    seeds = [int(s) for s in args.seeds.split(",")]
    for env in args.envs.split(","):
        for score in ("sum", "mean"):
            runs = [
                measure(env, score, seed, args.tasks, args.group, args.temperature, args.max_steps)
                for seed in seeds
            ]
            row = {k: round(sum(r[k] for r in runs) / len(runs), 4) for k in runs[0]}
            row["per_seed_shortest_share"] = [round(r["shortest_share"], 4) for r in runs]
            print(json.dumps({"env": env, "choice_score": score, "temperature": args.temperature, **row}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
