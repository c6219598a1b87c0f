"""What the update's micro-batching buys: one X-update at several ``algo.microbatch_steps``, side by side.

A minibatch of 64 recorded steps is one gradient step; ``microbatch_steps`` splits it into passes of
that many steps of similar length, each backpropagated at once (gradient accumulation: the same
gradient up to float rounding, ``tests/test_train.py``). One batch of rollouts (ALFWorld native,
``--tasks`` x ``--group``, subgoal rewards), then every setting updates a fresh copy of the same
policy on it, the settings interleaved for ``--repeats`` rounds so that load on the machine falls on
all of them alike; medians, and each one's ratio to the one-pass update (``microbatch_steps`` = 64).

    .venv/bin/python benchmarks/update_microbatch.py [--policy tiny] [--algos gigpo ppo] [--sizes 64 32 16 8]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch

from rspo_kit.envs import list_tasks
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout
from rspo_kit.policy.step_scores import step_tokens
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.train.config import AlgoConfig
from rspo_kit.train.update import Learner, UpdateBatch, update


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="tiny", help="a preset or a checkpoint folder (e.g. a warm start)")
    ap.add_argument("--algos", nargs="+", default=["gigpo", "ppo"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[64, 32, 16, 8])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    policy = Policy.load(args.policy)
    tasks = list_tasks("alfworld", split="train", n=args.tasks)
    with BatchRunner("alfworld", n_workers=0, env_kwargs={"max_steps": args.max_steps}) as runner:
        trajs = rollout(policy, runner, tasks, RolloutConfig(group_size=args.group), seed=0)
    batch = UpdateBatch(
        trajs, RewardModel.build("alfworld", process="subgoal").batch_rewards(trajs, "process")
    )
    steps = [s for t in trajs for s in t.steps]
    tokens = sum(step_tokens(s) for s in steps)
    report = {
        "policy": args.policy,
        "steps": len(steps),
        "tokens": tokens,
        "threads": args.threads,
        "algos": {},
    }
    for algo in args.algos:
        seconds: dict[int, list[float]] = {size: [] for size in args.sizes}
        for _ in range(args.repeats):
            for size in args.sizes:
                fresh = copy.deepcopy(policy)
                learner = Learner.build(fresh, fresh.model.parameters(), 1e-4, algo == "ppo", 1e-3)
                cfg = AlgoConfig(name=algo, minibatch_steps=64, microbatch_steps=size)
                start = time.perf_counter()
                update(learner, batch, cfg)
                seconds[size].append(time.perf_counter() - start)
        one_pass = statistics.median(seconds[max(args.sizes)])
        report["algos"][algo] = {
            size: {
                "median_s": round(statistics.median(v), 3),
                "ratio_to_one_pass": round(statistics.median(v) / one_pass, 3),
                "train_tokens_per_s": round(tokens / statistics.median(v)),
            }
            for size, v in seconds.items()
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
