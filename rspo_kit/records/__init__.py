"""Records that notebooks and widgets read: metrics rows (JSONL), per-turn trajectory tables (parquet),
the results a notebook records for batch runs (``RSPO_RESULTS`` lines, ``results.json``), and the
episodes of a run's final evaluations (parquet, one row per task and sample), and what a run started
from (``start.json``: the starting policy's provenance and the digest of its weights).

A record that cannot be read raises ``RecordError`` naming the file, the line and what is wrong
(``rspo_kit.records.files``). Nothing here knows about the trainer's internals: a metrics row is a flat dict of namespaced
numbers; a trajectory table is one row per turn with the rewards and advantages the update used.
"""

from rspo_kit.records.episodes import load_episodes, write_episodes
from rspo_kit.records.files import (
    RecordError,
    read_json,
    read_json_gz,
    read_jsonl,
    read_parquet,
    read_record,
    require_keys,
)
from rspo_kit.records.metrics import MetricsLog, load_metrics
from rspo_kit.records.notebook import NoResults, has_results, read_results, record, save_figure
from rspo_kit.records.start import read_start, write_start
from rspo_kit.records.tables import TURN_COLUMNS, load_turns, turn_table, write_table

__all__ = [
    "TURN_COLUMNS",
    "MetricsLog",
    "NoResults",
    "RecordError",
    "has_results",
    "load_episodes",
    "load_metrics",
    "load_turns",
    "read_json",
    "read_json_gz",
    "read_jsonl",
    "read_parquet",
    "read_record",
    "read_results",
    "read_start",
    "record",
    "require_keys",
    "save_figure",
    "turn_table",
    "write_episodes",
    "write_start",
    "write_table",
]
