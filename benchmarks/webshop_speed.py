"""WebShop speed: env steps per second (search-free) and search latency on the 5,000-product catalogue.

Steps: on eval goals, one search then uniformly random admissible clicks plus 20% invalid strings,
resetting when an episode ends; the search steps are left out of the timing. Search latency: fresh
(never memoised) BM25 queries built from the eval instructions. One run; medians reported.

    .venv/bin/python benchmarks/webshop_speed.py [--steps 5000] [--queries 400]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from rspo_kit.envs import list_tasks, make_env
from rspo_kit.envs.webshop.expert import parse_instruction


def step_speed(steps: int, seed: int) -> dict:
    rng = random.Random(seed)
    tasks = list_tasks("webshop", split="eval")
    env = make_env("webshop", max_steps=15)
    click_time, clicks, resets, done = 0.0, 0, 0, True
    while clicks < steps:
        if done:
            task = tasks[resets % len(tasks)]
            env.reset(task)
            resets += 1
            obs = env.step(f"search[{parse_instruction(task.meta['goal']['instruction']).wanted}]").obs
        actions = [a for a in obs.admissible if a.startswith("click[")]
        action = rng.choice(actions) if actions and rng.random() > 0.2 else "fly to the moon"
        if action == "click[back to search]":
            action = "click[< prev]"  # stay off the search page: these are search-free steps
        t0 = time.perf_counter()
        res = env.step(action)
        click_time += time.perf_counter() - t0
        obs, done, clicks = res.obs, res.done, clicks + 1
    return {"steps": clicks, "steps_per_s": clicks / click_time, "episodes": resets}


def search_latency(n_queries: int) -> dict:
    env = make_env("webshop")
    queries = [
        parse_instruction(t.meta["goal"]["instruction"]).wanted for t in list_tasks("webshop", split="train")
    ]
    queries = list(dict.fromkeys(queries))[:n_queries]
    times = []
    for q in queries:
        t0 = time.perf_counter()
        env.engine._search(q)  # bypass the memo: the cost of a query never seen before
        times.append(1000 * (time.perf_counter() - t0))
    times.sort()
    return {
        "queries": len(times),
        "median_ms": statistics.median(times),
        "p95_ms": times[int(0.95 * (len(times) - 1))],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=400)
    args = ap.parse_args()
    t0 = time.perf_counter()
    env = make_env("webshop")  # builds (or loads) the catalogue and the index
    setup_s = time.perf_counter() - t0
    summary = {
        "env": f"webshop ({len(env.catalogue)} products, {env.catalogue.source})",
        "setup_s": setup_s,
        "search_free_steps": step_speed(args.steps, seed=0),
        "search": search_latency(args.queries),
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
