"""Rollout throughput of a preset: env steps/s, model time, and the share of wall time outside the model.

64 parallel episodes (8 tasks x group 8) per env, ``choice`` mode (the tiny preset's default), one
rollout per env after a warm-up; prompt building counts as outside the model.

    .venv/bin/python benchmarks/rollout_speed.py [--preset tiny] [--envs alfworld webshop] [--max-steps 15]
"""

from __future__ import annotations

import argparse
import json
import time

from rspo_kit.envs import list_tasks
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--envs", nargs="+", default=["alfworld", "webshop"])
    ap.add_argument("--engine", default=None, help="alfworld engine (alfworld | native)")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    policy = Policy.load(args.preset)
    report = {"preset": args.preset, "mode": policy.mode, "episodes": args.tasks * args.group, "envs": {}}
    for env in args.envs:
        kwargs = {"max_steps": args.max_steps}
        if env == "alfworld" and args.engine:
            kwargs["engine"] = args.engine
        tasks = list_tasks(env, split="train", n=args.tasks)
        with BatchRunner(env, n_workers=args.workers, env_kwargs=kwargs) as runner:
            rollout(policy, runner, tasks[:2], RolloutConfig(group_size=2))  # warm-up: workers, caches
            timings: dict[str, float] = {}
            start = time.perf_counter()
            trajs = rollout(policy, runner, tasks, RolloutConfig(group_size=args.group), timings=timings)
            wall = time.perf_counter() - start
        steps = sum(t.env_steps for t in trajs)
        tokens = sum(len(s.action_ids) for t in trajs for s in t.steps)
        report["envs"][env] = {
            "env_kwargs": kwargs,
            "env_steps": steps,
            "wall_s": wall,
            "env_steps_per_s": steps / wall,
            "action_tokens_per_s": tokens / wall,
            "seconds": timings,
            "share_outside_model": 1 - timings["model"] / wall,
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
