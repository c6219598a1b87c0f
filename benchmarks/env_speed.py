"""Environment speed: steps per second and reset time of the real ALFWorld engine.

Plays uniformly random admissible actions (plus 20% invalid strings) on eval tasks in one process,
resetting when an episode ends, until 1000 steps are timed; three repeats, medians reported.

    .venv/bin/python benchmarks/env_speed.py [--steps 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from rspo_kit.envs import list_tasks, make_env


def measure(env_name: str, steps: int, seed: int, **env_kwargs) -> dict:
    rng = random.Random(seed)
    tasks = list_tasks(env_name, split="eval")
    env = make_env(env_name, **env_kwargs)
    step_time = reset_time = 0.0
    resets = taken = 0
    done = True
    while taken < steps:
        if done:
            t0 = time.perf_counter()
            obs = env.reset(tasks[resets % len(tasks)])
            reset_time += time.perf_counter() - t0
            resets += 1
        action = rng.choice(obs.admissible) if rng.random() > 0.2 else "fly to the moon"
        t0 = time.perf_counter()
        res = env.step(action)
        step_time += time.perf_counter() - t0
        obs, done, taken = res.obs, res.done, taken + 1
    return {"steps_per_s": steps / step_time, "reset_ms": 1000 * reset_time / resets, "resets": resets}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    list_tasks("alfworld", split="eval")  # warm the manifest
    runs = [measure("alfworld", args.steps, seed, engine="alfworld") for seed in range(args.repeats)]
    summary = {
        "env": "alfworld (real engine, generated scenes)",
        "steps": args.steps,
        "repeats": args.repeats,
        "median_steps_per_s": statistics.median(r["steps_per_s"] for r in runs),
        "median_reset_ms": statistics.median(r["reset_ms"] for r in runs),
        "runs": runs,
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
