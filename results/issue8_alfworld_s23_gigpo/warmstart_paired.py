"""Session 23: each variant's final evaluations against the warm start's, task by task.

The warm start's episodes come from the evaluation CLI with ``--episodes`` (greedy, and sampled with
seed 0: ``runs/s23/warm_<mode>_<split>.csv``, from
``evaluate --policy .cache/warmstart/alfworld_tiny_eaf079b86b94/policy --env alfworld --split SPLIT
--n 120 --max-steps 30 [--sampled] --episodes runs/s23/warm_MODE_SPLIT.csv``); each cell's from its ``final_episodes.parquet``. Per
evaluation: each task's (cell success averaged over the seeds) − (the warm start's), mean over the
120 tasks with a 95% t-interval over tasks -> warmstart_paired.md

    .venv/bin/python results/issue8_alfworld_s23_gigpo/warmstart_paired.py
"""

from pathlib import Path

import pandas as pd

from rspo_kit.experiments.sweep import mean_ci
from rspo_kit.records import load_episodes

OUT = Path("runs/sweeps/s22_alfworld_gigpo")
HERE = Path(__file__).parent
VARIANTS = {"GiGPO": "false", "GiGPO + RSPO": "true", "GiGPO, control": "control"}
EVALUATIONS = ["final/eval", "final/eval_unseen", "final_sampled/eval", "final_sampled/eval_unseen"]


def warm(evaluation: str) -> pd.Series:
    mode = "sampled" if evaluation.startswith("final_sampled") else "greedy"
    split = evaluation.split("/")[1]
    frame = pd.read_csv(f"runs/s23/warm_{mode}_{split}.csv", dtype={"task_id": str})
    return frame.set_index("task_id")["won"].astype(float)


lines = [
    "| trained − warm start, per task (points) | seeds | " + " | ".join(EVALUATIONS) + " |",
    "|---|---|" + "---|" * len(EVALUATIONS),
]
for name, swap in VARIANTS.items():
    cells = sorted(OUT.glob(f"ALGO=gigpo__SWAP={swap}__SEED=*/final_episodes.parquet"))
    episodes = pd.concat(
        [load_episodes(c.parent).assign(seed=c.parent.name.rsplit("=", 1)[1]) for c in cells],
        ignore_index=True,
    )
    row = []
    for evaluation in EVALUATIONS:
        trained = episodes[episodes["evaluation"] == evaluation].groupby("task_id")["won"].mean()
        diff = (trained - warm(evaluation).reindex(trained.index)).dropna()
        mean, low, high = mean_ci(diff.tolist())
        row.append(f"{100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]")
    seeds = ", ".join(sorted(set(episodes["seed"])))
    lines.append(f"| {name} | {seeds} | " + " | ".join(row) + " |")
(HERE / "warmstart_paired.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
