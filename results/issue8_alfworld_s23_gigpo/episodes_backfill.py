"""Session 23: the final evaluations' episodes of the cells that finished before runs recorded them.

For each finished cell without ``final_episodes.parquet``: its actor at the last checkpoint evaluated
again exactly as the trainer's final evaluation does (the run's env settings, seed and task count;
greedy and sampled on each final split), the episodes written as the trainer now writes them, and
each evaluation's success checked against the one the run recorded (a mismatch is printed and the
cell gets no episodes). Read-only on everything else in the run folder.

    OMP_NUM_THREADS=1 .venv/bin/python results/issue8_alfworld_s23_gigpo/episodes_backfill.py runs/sweeps/s22_alfworld_gigpo
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from rspo_kit.experiments.sweep import load_sweep
from rspo_kit.policy.evaluate import evaluate
from rspo_kit.records import load_metrics, write_episodes
from rspo_kit.records.episodes import EPISODES_FILE
from rspo_kit.train.config import RunConfig
from rspo_kit.train.trainer import trained_actor


def backfill(run_dir: Path) -> None:
    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    last = load_metrics(run_dir).iloc[-1]
    actor = trained_actor(run_dir)
    found = {}
    for split in cfg.train.final_eval_splits:
        for prefix, greedy in ((f"final/{split}", True), (f"final_sampled/{split}", False)):
            if f"{prefix}/success" not in last:
                continue
            t0 = time.perf_counter()
            res = evaluate(
                actor,
                cfg.env.name,
                split,
                cfg.train.final_eval_n or cfg.train.eval_n,
                greedy=greedy,
                seed=cfg.train.seed,
                n_workers=cfg.env.n_workers,
                max_steps=cfg.env.max_steps,
                progress_bar=False,
                env_kwargs={"engine": cfg.env.engine} if cfg.env.engine else None,
            )
            recorded = float(last[f"{prefix}/success"])
            print(
                f"{run_dir.name} {prefix}: {res.success:.4f} (recorded {recorded:.4f}) "
                f"in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            if abs(res.success - recorded) > 1e-9:
                print(f"  MISMATCH: {run_dir.name} keeps no episodes", flush=True)
                return
            found[prefix] = res.episodes
    for prefix, episodes in found.items():
        write_episodes(run_dir, prefix, episodes)


def main(out: str) -> None:
    torch.set_num_threads(1)
    _, rows = load_sweep(out)
    for row in rows:
        run_dir = Path(out) / row["cell"]
        if not (run_dir / EPISODES_FILE).exists():
            backfill(run_dir)


if __name__ == "__main__":
    main(sys.argv[1])
