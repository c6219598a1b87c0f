"""Wall time per 1,000 env steps: the chain testbed against ALFWorld (native engine), side by side.

The tiny preset samples the actions (``choice`` mode, 8 tasks x group 8, in-process envs, one torch
thread), as a training iteration's rollout does. Rounds alternate the two envs so that load on the
machine hits both alike; the result is each env's median over the rounds and their ratio. A second
line times the envs alone (uniformly random admissible actions, no model).

    .venv/bin/python benchmarks/testbed_speed.py [--level chain-6x3] [--rounds 5] [--max-steps 18]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch

from rspo_kit.envs import list_tasks, make_env
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout


def rollout_seconds_per_1k(policy: Policy, env: str, tasks, group: int, max_steps: int, seed: int) -> float:
    with BatchRunner(env, n_workers=0, env_kwargs={"max_steps": max_steps}) as runner:
        start = time.perf_counter()
        trajs = rollout(policy, runner, tasks, RolloutConfig(group_size=group), seed=seed)
        wall = time.perf_counter() - start
    return 1000 * wall / sum(t.env_steps for t in trajs)


def env_seconds_per_1k(env_name: str, tasks, max_steps: int, seed: int, steps: int = 5000) -> float:
    rng, env = random.Random(seed), make_env(env_name, max_steps=max_steps)
    done, start, i = 0, time.perf_counter(), 0
    while done < steps:
        env.reset(tasks[i % len(tasks)])
        i += 1
        while not env.done and done < steps:
            env.step(rng.choice(env.admissible_actions()))
            done += 1
    return 1000 * (time.perf_counter() - start) / done


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", default="chain-6x3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=18, help="one cap for both envs (the level's own)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    policy = Policy.load("tiny", mode="choice", seed=0)
    envs = [args.level, "alfworld"]
    tasks = {env: list_tasks(env, split="train", n=args.tasks) for env in envs}
    for env in envs:  # warm-up: caches, the ALFWorld scenes
        rollout_seconds_per_1k(policy, env, tasks[env][:2], 2, args.max_steps, seed=0)
    model = {env: [] for env in envs}
    alone = {env: [] for env in envs}
    for r in range(args.rounds):
        for env in envs if r % 2 == 0 else envs[::-1]:
            model[env].append(rollout_seconds_per_1k(policy, env, tasks[env], args.group, args.max_steps, r))
            alone[env].append(env_seconds_per_1k(env, tasks[env], args.max_steps, r))
    med = {env: statistics.median(model[env]) for env in envs}
    med_alone = {env: statistics.median(alone[env]) for env in envs}
    print(json.dumps({"args": vars(args), "rollout_s_per_1k": model, "env_only_s_per_1k": alone}))
    print(
        f"tiny preset rollout, s per 1,000 env steps (median of {args.rounds}): {args.level} "
        f"{med[args.level]:.2f}, alfworld (native) {med['alfworld']:.2f}; "
        f"ratio alfworld / {args.level} = {med['alfworld'] / med[args.level]:.2f}"
    )
    print(
        f"env alone (random actions), s per 1,000 steps: {args.level} {med_alone[args.level]:.4f}, "
        f"alfworld (native) {med_alone['alfworld']:.4f}; "
        f"ratio {med_alone['alfworld'] / med_alone[args.level]:.1f}"
    )


if __name__ == "__main__":
    main()
