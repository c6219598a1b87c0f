"""Per-turn trajectory tables: one row per step, with the rewards and advantages of the update."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rspo_kit.records.files import read_parquet

TURN_COLUMNS = (
    "iteration",
    "role",  # actor, explorer or replay (a replayed explorer trajectory inside an actor group)
    "group_id",
    "task_id",
    "kind",
    "traj_id",  # index of the trajectory within its table (diagnose() reads group_id + traj_id)
    "step",
    "action",
    "valid",
    "logprob",
    "process_reward",
    "reward",  # the per-step reward the update optimised (signal of that role)
    "advantage",
    "outcome",  # the trajectory's outcome reward R_o
    "won",
    "score",
    "anchor",
    "progress",  # JSON of progress after the step
)


def turn_table(
    trajs: Sequence[Any],
    iteration: int,
    process: Sequence[Sequence[float]],
    rewards: Sequence[Sequence[float]] | None = None,
    advantages: Sequence[float] | None = None,
    outcomes: Sequence[float] | None = None,
    first_id: int = 0,
) -> pd.DataFrame:
    """One row per turn. ``advantages`` is flat over the steps of ``trajs`` (in order), if known.

    Trajectory ids run from ``first_id``: tables concatenated for one iteration pass distinct ranges,
    so ``(group_id, traj_id)`` names one trajectory.
    """
    rows, k = [], 0
    for i, t in enumerate(trajs):
        for j, s in enumerate(t.steps):
            rows.append(
                {
                    "iteration": iteration,
                    "role": t.source,
                    "group_id": t.group_id,
                    "task_id": t.task_id,
                    "kind": t.kind,
                    "traj_id": first_id + i,
                    "step": j,
                    "action": s.action,
                    "valid": bool(s.valid),
                    "logprob": float(s.logprob),
                    "process_reward": float(process[i][j]),
                    "reward": float(rewards[i][j]) if rewards is not None else float("nan"),
                    "advantage": float(advantages[k]) if advantages is not None else float("nan"),
                    "outcome": float(outcomes[i]) if outcomes is not None else float("nan"),
                    "won": bool(t.won),
                    "score": float(t.score),
                    "anchor": s.anchor,
                    "progress": json.dumps(s.progress_after, sort_keys=True, default=str),
                }
            )
            k += 1
    return pd.DataFrame(rows, columns=list(TURN_COLUMNS))


def write_table(frame: pd.DataFrame, path: Path) -> Path:
    """Write a parquet table atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    frame.to_parquet(tmp, index=False)
    tmp.replace(path)
    return path


def load_turns(run_dir: str | Path, iteration: int | None = None) -> pd.DataFrame:
    """The per-turn tables of a run (one iteration, or all of them concatenated)."""
    folder = Path(run_dir) / "turns"
    files = (
        [folder / f"iter_{iteration:05d}.parquet"]
        if iteration is not None
        else sorted(folder.glob("*.parquet"))
    )
    if not files or not files[0].exists():
        raise FileNotFoundError(f"no turn tables under {folder}")
    return pd.concat([read_parquet(f) for f in files], ignore_index=True)
