"""Every episode of a run's final evaluations, one row each, so that two runs evaluated on the same
tasks can be compared task by task (``rspo_kit.experiments.pairing.task_paired_table``).

A run writes ``final_episodes.parquet``: one row per (evaluation, task, sample), where the
evaluation is the metrics prefix it reports under (``final/eval``, ``final_sampled/eval_unseen``).
Writing an evaluation replaces its earlier rows, so a resumed run that evaluates again leaves one copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from rspo_kit.records.files import read_parquet
from rspo_kit.records.tables import write_table

EPISODES_FILE = "final_episodes.parquet"
EPISODE_COLUMNS = ("evaluation", "task_id", "kind", "sample", "won", "score", "steps")


def write_episodes(run_dir: str | Path, evaluation: str, episodes: Sequence[Mapping]) -> Path:
    """Store ``episodes`` (``EvalResult.episodes``) as the rows of ``evaluation``, atomically.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = write_episodes(d, "final/eval", [{"task_id": "a", "kind": "pick", "sample": 0, "won": True,
    ...                                       "score": 1.0, "steps": 4}])
    >>> _ = write_episodes(d, "final/eval", [{"task_id": "a", "kind": "pick", "sample": 0, "won": False,
    ...                                       "score": 0.0, "steps": 30}])  # evaluated again: replaced
    >>> load_episodes(d)[["evaluation", "task_id", "won"]].values.tolist()
    [['final/eval', 'a', False]]
    """
    path = Path(run_dir) / EPISODES_FILE
    rows = pd.DataFrame([{"evaluation": evaluation, **e} for e in episodes], columns=list(EPISODE_COLUMNS))
    if path.exists():
        kept = read_parquet(path)
        rows = pd.concat([kept[kept["evaluation"] != evaluation], rows], ignore_index=True)
    rows["task_id"] = rows["task_id"].astype(str)
    return write_table(rows, path)


def load_episodes(run_dir: str | Path) -> pd.DataFrame:
    """The final evaluations' episodes of a run (``FileNotFoundError`` for a run that wrote none,
    e.g. one that finished before runs recorded them)."""
    path = Path(run_dir) / EPISODES_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {EPISODES_FILE} in {run_dir}")
    return read_parquet(path)
