"""Metrics rows: kept in memory, appended to ``metrics.jsonl`` (one JSON object per line, flushed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from rspo_kit.records.files import read_jsonl

METRICS_FILE = "metrics.jsonl"  # a run's metrics rows, in its run folder


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf; None reads back as NaN in pandas
    return value


class MetricsLog:
    """``log(row)`` appends a row; ``frame()`` is the pandas view notebooks read."""

    def __init__(self, path: Path | None = None, rows: list[dict] | None = None):
        self.path = Path(path) if path else None
        self.rows: list[dict] = list(rows or [])

    def log(self, row: dict) -> None:
        self.rows.append(dict(row))
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(json.dumps({k: _clean(v) for k, v in row.items()}) + "\n")
                f.flush()

    def rewrite(self) -> None:
        """Write all rows anew (after a resume truncated the history to the checkpoint)."""
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(
                "".join(json.dumps({k: _clean(v) for k, v in r.items()}) + "\n" for r in self.rows)
            )
            tmp.replace(self.path)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def load_metrics(run_dir: str | Path) -> pd.DataFrame:
    """The metrics of a run directory, one row per iteration (row 0: the starting point).

    ``RecordError`` names the file and the line that is not a JSON object."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {METRICS_FILE} in {run_dir}")
    return pd.DataFrame(read_jsonl(path))
