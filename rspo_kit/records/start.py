"""What a run started from: ``start.json`` in its run folder, written once when the run begins.

The starting policy's provenance (a cached warm start, one built now with its SFT record and
machine, or a preset) and ``weights_sha256``, the digest of its weights
(``rspo_kit.policy.models.weights_digest``). Two runs with one digest started from the same policy
bit for bit; a warm start rebuilt by the same recipe on another machine gets another digest, and
comparing runs from two such builds compares warm starts as well as algorithms.
"""

from __future__ import annotations

import json
from pathlib import Path

from rspo_kit.paths import atomic_write_text
from rspo_kit.records.files import read_json

START_FILE = "start.json"  # a run's starting policy, in its run folder


def write_start(run_dir: str | Path, record: dict) -> bool:
    """Write ``record`` to ``run_dir/START_FILE`` unless the run already has one (a resumed run keeps
    what it first started from); returns whether it wrote."""
    path = Path(run_dir) / START_FILE
    if path.exists():
        return False
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return True


def read_start(run_dir: str | Path) -> dict | None:
    """The run's start record, or None for a run without one (runs recorded before start records existed)."""
    path = Path(run_dir) / START_FILE
    return read_json(path) if path.exists() else None
