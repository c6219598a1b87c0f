"""ALFWorld speed, native engine against the real one, on the same eval scenes in one run.

Each engine plays uniformly random admissible actions (plus 20% invalid strings) on the eval tasks in
one process, resetting when an episode ends; only ``step`` calls are timed for steps/s, and ``reset``
separately. Both engines play the same action sequence rule, seeds and tasks; the native engine takes
more steps per repeat so that its timing is not noise. Medians over the repeats are reported, with the
ratio of the medians.

    .venv/bin/python benchmarks/alfworld_native_speed.py [--real-steps 1000] [--native-steps 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from rspo_kit.envs import list_tasks, make_env


def measure(engine: str, steps: int, seed: int) -> dict:
    rng = random.Random(seed)
    tasks = list_tasks("alfworld", split="eval")
    env = make_env("alfworld", engine=engine)
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
    if hasattr(env, "close"):
        env.close()
    return {"steps_per_s": steps / step_time, "reset_ms": 1000 * reset_time / resets, "resets": resets}


def summarize(runs: list[dict]) -> dict:
    return {
        "median_steps_per_s": statistics.median(r["steps_per_s"] for r in runs),
        "median_reset_ms": statistics.median(r["reset_ms"] for r in runs),
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real-steps", type=int, default=1000)
    ap.add_argument("--native-steps", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    list_tasks("alfworld", split="eval")  # warm the manifest
    # The native engine caches compiled scenes (and their plans); the first repeat pays for building them.
    real = summarize([measure("alfworld", args.real_steps, seed) for seed in range(args.repeats)])
    native = summarize([measure("native", args.native_steps, seed) for seed in range(args.repeats)])
    summary = {
        "env": "alfworld eval split (generated scenes), random admissible + 20% invalid actions",
        "repeats": args.repeats,
        "real": {"steps": args.real_steps, **real},
        "native": {"steps": args.native_steps, **native},
        "speedup_steps_per_s": native["median_steps_per_s"] / real["median_steps_per_s"],
        "speedup_reset": real["median_reset_ms"] / native["median_reset_ms"],
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
