"""Where a training iteration's time goes, and what RSPO costs over its base algorithm.

Every (algorithm, variant) cell runs in its own subprocess (so that peak memory is its own): the tiny
preset from the same untrained policy, no evaluation, ``--warmup`` iterations and then ``--iterations``
measured ones. An untrained policy runs most episodes to the step cap, so every cell does about the
same work per iteration; the trainer's ``perf/*`` timings split each iteration into

- generation: the model calls of the rollouts (actor and explorer), i.e. candidate scoring;
- env: env resets and steps; prompts: building the prompt of every step;
- update: the policy and critic passes of the X-updates (pre-pass, minibatch forward/backward/step);
- bookkeeping: everything else (rewards, advantages, the swap, records), the iteration's remainder.

Medians over the measured iterations; RSPO's cost is the ratio of its medians to its base algorithm's
at equal iterations, and per 1,000 env steps (RSPO's explorer adds env steps). An iteration of RSPO
(or its control) is one loop of the paper's Algorithm 1: k = swap.loop_steps updates of A (and of B),
so per iteration it does k times plain's updates; per 1,000 env steps is the comparable figure.

    .venv/bin/python benchmarks/iteration_breakdown.py [--algos grpo gigpo ppo] [--env alfworld]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from rspo_kit.policy.step_scores import step_tokens

PARTS = ("generation", "env", "prompts", "update", "bookkeeping")


class TokenCounter:
    """Trainer callback: tokens the model scored in rollouts, and tokens the updates trained on."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, float]] = {}

    @staticmethod
    def _tokens(trajs) -> int:
        return sum(step_tokens(s) for t in trajs for s in t.steps)

    def on_rollout_end(self, event) -> None:
        row = self.rows.setdefault(event.iteration, {"rollout_tokens": 0, "update_tokens": 0})
        row["rollout_tokens"] += self._tokens(event.data["trajectories"])

    def on_update_end(self, event) -> None:
        row = self.rows.setdefault(event.iteration, {"rollout_tokens": 0, "update_tokens": 0})
        # the paper's loop: one event per loop, with A's k batches
        for batch in event.data.get("batches", [event.data["batch"]]):
            row["update_tokens"] += self._tokens(batch.trajs)


def _num(value) -> float:
    """A metric as a float; missing or NaN (a column other rows have) counts as 0."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(x) else x


def breakdown(row: dict, explorer_updates: int, actor_updates: int = 1) -> dict[str, float]:
    """Seconds per part of one iteration's metrics row (see the module docstring).

    ``explorer_updates`` and ``actor_updates``: the iteration's updates of B and of A (the paper's loop:
    k of each, its row holding each update's mean parts and each role's rollouts and updates timed whole).
    """

    def g(key: str) -> float:
        return _num(row.get(key))

    if "perf/actor_update_s" in row:  # the paper's loop (swap.mode rspo, control)
        roles = ("actor_rollout", "explorer_rollout", "collection_rollout")
        book = actor_updates * sum(g(f"perf/update_{p}_s") for p in ("flatten", "advantages"))
        book += explorer_updates * sum(g(f"perf/explorer_update_{p}_s") for p in ("flatten", "advantages"))
        parts = {
            "generation": sum(g(f"perf/{r}_model_s") for r in roles),
            "env": sum(g(f"perf/{r}_env_s") for r in roles),
            "prompts": sum(g(f"perf/{r}_prompt_s") for r in roles),
            "update": max(0.0, g("perf/actor_update_s") + g("perf/explorer_update_s") - book),
        }
        parts["bookkeeping"] = max(0.0, g("perf/iteration_s") - g("perf/eval_s") - sum(parts.values()))
        return parts
    roles = ("rollout", "explorer_rollout")
    explorer_book = explorer_updates * sum(
        g(f"perf/explorer_update_{p}_s") for p in ("flatten", "advantages")
    )
    parts = {
        "generation": sum(g(f"perf/{r}_model_s") for r in roles),
        "env": sum(g(f"perf/{r}_env_s") for r in roles),
        "prompts": sum(g(f"perf/{r}_prompt_s") for r in roles),
        "update": g("perf/update_prepass_s")
        + g("perf/update_minibatch_s")
        + max(0.0, g("perf/explorer_update_s") - explorer_book),
    }
    parts["bookkeeping"] = max(0.0, g("perf/iteration_s") - g("perf/eval_s") - sum(parts.values()))
    return parts


def run_cell(args) -> dict:
    """One cell, in this process: train, then report per-iteration parts, tokens and peak memory."""
    import torch

    from rspo_kit.train.presets import preset
    from rspo_kit.train.setup import initial_policy
    from rspo_kit.train.trainer import Trainer

    torch.set_num_threads(args.threads)
    total = args.warmup + args.iterations
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = preset(
            "tiny",
            env=args.env,
            algo=args.algo,
            swap=args.variant,
            policy__warmstart=False,
            env__max_steps=args.max_steps,
            env__tasks_per_iteration=args.tasks,
            env__n_workers=args.workers,
            algo__group_size=args.group,
            train__iterations=total,
            train__eval_every=10**6,
            train__eval_n=1,
            train__checkpoint_every=10**6,
            train__progress_bar=False,
            train__run_dir=run_dir,
        )
        counter = TokenCounter()
        policy, _ = initial_policy(cfg, progress_bar=False)
        trainer = Trainer(cfg, policy, [counter])
        t0 = time.perf_counter()
        result = trainer.run()
        wall = time.perf_counter() - t0
    rows = [r for r in result.metrics.to_dict("records") if r["iteration"] > args.warmup]
    s = cfg.swap
    if s.paper_loop:  # k updates of A a loop, and of B under rspo (the control's B takes none)
        actor_updates, explorer_updates = s.loop_steps, s.loop_steps if s.mode == "rspo" else 0
    else:
        actor_updates, explorer_updates = 1, s.explorer_updates if s.enabled else 0
    out = []
    for r in rows:
        k = int(r["iteration"])
        out.append(
            {
                "iteration_s": _num(r["perf/iteration_s"]) - _num(r.get("perf/eval_s")),
                "env_steps": _num(r.get("rollout/env_steps")) + _num(r.get("explorer_rollout/env_steps")),
                **breakdown(r, explorer_updates, actor_updates),
                # A's minibatch passes of the iteration (the loop's row holds one update's mean)
                "actor_minibatch": actor_updates * _num(r.get("perf/update_minibatch_s")) / cfg.algo.epochs,
                **counter.rows.get(k, {}),
            }
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rows": out, "peak_rss_mb": peak_mb, "wall_s": wall}


def summarize(cell: dict) -> dict[str, float]:
    rows = cell["rows"]

    def med(key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in rows)

    s = {k: med(k) for k in ("iteration_s", "env_steps", *PARTS, "rollout_tokens", "update_tokens")}
    s["outside_model_share"] = statistics.median(
        (r["env"] + r["prompts"] + r["bookkeeping"]) / r["iteration_s"] for r in rows
    )
    s["bookkeeping_share"] = statistics.median(
        (r["prompts"] + r["bookkeeping"]) / r["iteration_s"] for r in rows
    )
    s["s_per_1k_env_steps"] = 1000 * s["iteration_s"] / max(1.0, s["env_steps"])
    s["env_steps_per_s"] = statistics.median(r["env_steps"] / max(r["env"], 1e-9) for r in rows)
    s["generation_tokens_per_s"] = statistics.median(
        r.get("rollout_tokens", 0) / max(r["generation"], 1e-9) for r in rows
    )
    s["training_tokens_per_s"] = statistics.median(  # forward + backward of the actor's minibatch passes
        r.get("update_tokens", 0) / max(r["actor_minibatch"], 1e-9) for r in rows
    )
    s["peak_rss_mb"] = cell["peak_rss_mb"]
    return s


def table(results: dict[str, dict]) -> str:
    head = (
        "| cell | s/iter | env steps/iter | gen % | env % | prompts % | update % | bookkeeping % "
        "| outside model % | s per 1k env steps | peak RSS MB |"
    )
    lines = [head, "|" + "---|" * 11]
    for name, s in results.items():
        pct = [f"{100 * s[p] / s['iteration_s']:.0f}" for p in PARTS]
        lines.append(
            f"| {name} | {s['iteration_s']:.1f} | {s['env_steps']:.0f} | {' | '.join(pct)} "
            f"| {100 * s['outside_model_share']:.0f} | {s['s_per_1k_env_steps']:.1f} | {s['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def cost_table(results: dict[str, dict], algos) -> str:
    lines = [
        "| algorithm | RSPO / plain time per iteration | per 1k env steps | peak memory |",
        "|---|---|---|---|",
    ]
    for algo in algos:
        plain, rspo = results.get(f"{algo}/plain"), results.get(f"{algo}/rspo")
        if plain and rspo:
            lines.append(
                f"| {algo} | {rspo['iteration_s'] / plain['iteration_s']:.2f}x "
                f"| {rspo['s_per_1k_env_steps'] / plain['s_per_1k_env_steps']:.2f}x "
                f"| {rspo['peak_rss_mb'] / plain['peak_rss_mb']:.2f}x |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--algos", nargs="+", default=["grpo", "gigpo", "ppo"])
    ap.add_argument("--variants", nargs="+", default=["plain", "rspo"])
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=2, help="tasks per iteration")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--workers", type=int, default=0, help="BatchRunner workers (0: in-process)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the JSON report here")
    ap.add_argument("--cell", nargs=2, metavar=("ALGO", "VARIANT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.cell:  # child process: one cell, JSON on the last line of stdout
        args.algo, args.variant = args.cell
        print(json.dumps(run_cell(args)))
        return 0

    results, raw = {}, {}
    passthrough = [
        f"--{k.replace('_', '-')}={getattr(args, k)}"
        for k in ("env", "warmup", "iterations", "tasks", "group", "max_steps", "workers", "threads")
    ]
    for algo in args.algos:
        for variant in args.variants:
            name = f"{algo}/{variant}"
            print(f"running {name} ...", file=sys.stderr, flush=True)
            proc = subprocess.run(
                [sys.executable, __file__, "--cell", algo, variant, *passthrough],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"cell {name} failed (exit {proc.returncode})")
            raw[name] = json.loads(proc.stdout.strip().splitlines()[-1])
            results[name] = summarize(raw[name])
    report = {"args": vars(args), "cells": results, "raw": raw}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    print(f"tiny preset, {args.env}, {args.tasks} tasks x group {args.group}, cap {args.max_steps} steps, ")
    print(
        f"{args.threads} torch threads; medians over {args.iterations} iterations after {args.warmup} warm-up\n"
    )
    print(table(results))
    print()
    print(cost_table(results, args.algos))
    print()
    print("| cell | env steps/s (in rollouts) | generation tokens/s | training tokens/s |")
    print("|---|---|---|---|")
    for name, s in results.items():
        print(
            f"| {name} | {s['env_steps_per_s']:.0f} | {s['generation_tokens_per_s']:.0f} "
            f"| {s['training_tokens_per_s']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
