"""A sweep's record, small enough to commit, that ``report`` reads again like the sweep itself.

    python -m rspo_kit.experiments.archive runs/sweeps/alfworld-40k results/alfworld_paper_loop/archive_equal_updates

A sweep folder holds checkpoints and executed notebooks (hundreds of MB), so it is never committed,
and a fresh checkout would have only the aggregated CSVs: it could not pool further seeds with the
committed ones task by task. ``archive_sweep`` keeps what the reports read, for every finished cell:

- ``sweep.json`` — the manifest, as the sweep wrote it;
- ``<cell>/results.json`` — what the cell's notebook recorded (its ``RSPO_RESULTS`` line);
- ``<cell>/final_episodes.parquet`` — its final evaluations' episodes (the task-by-task tables);
- ``<cell>/metrics.jsonl`` — its training log (``report --statistics``, the curves);
- ``<cell>/start.json`` — what it started from, with the digest of those weights (where the run kept one).

Other run folders in the sweep folder that recorded final episodes (``warmstart_run`` of ``sweep
--reference-run``, the reference of ``report --reference``) keep theirs. An archive is read by
``load_sweep`` — a cell without its notebook is read from ``<cell>/results.json`` — so
``report ARCHIVE NEW_SWEEP`` pools the two. Tens of kB a cell.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from rspo_kit.experiments.aggregation import load_sweep
from rspo_kit.experiments.grid import MANIFEST
from rspo_kit.paths import atomic_write_text
from rspo_kit.records.episodes import EPISODES_FILE
from rspo_kit.records.metrics import METRICS_FILE
from rspo_kit.records.notebook import RESULTS_FILE
from rspo_kit.records.start import START_FILE

KEPT = (EPISODES_FILE, METRICS_FILE, START_FILE)  # copied as they are from each run folder


def archive_sweep(out_dir: str | Path, dest: str | Path) -> list[str]:
    """Write the record of ``out_dir``'s finished cells (and of any other run folder in it with final
    episodes) into ``dest``; returns the cells archived. Rerunning it updates ``dest``: cells that
    finished since are added, the manifest is the sweep's current one. ``dest`` must not be the
    sweep folder itself."""
    out, dest = Path(out_dir), Path(dest)
    if dest.resolve() == out.resolve():
        raise ValueError(f"archive {out} into another folder, not into itself")
    manifest, rows = load_sweep(out)
    dest.mkdir(parents=True, exist_ok=True)
    atomic_write_text(dest / MANIFEST, (out / MANIFEST).read_text())
    names = [r["cell"] for r in rows]
    for row in rows:
        results = {k: v for k, v in row.items() if k != "cell" and k not in manifest["cells"][row["cell"]]}
        folder = dest / row["cell"]
        folder.mkdir(exist_ok=True)
        atomic_write_text(folder / RESULTS_FILE, json.dumps(results, sort_keys=True, indent=1) + "\n")
        _copy_kept(out / row["cell"], folder)
    for run in sorted(p for p in out.iterdir() if p.is_dir() and p.name not in manifest["cells"]):
        if (run / EPISODES_FILE).exists():  # e.g. warmstart_run
            (dest / run.name).mkdir(exist_ok=True)
            _copy_kept(run, dest / run.name)
    return names


def _copy_kept(run: Path, folder: Path) -> None:
    for name in KEPT:
        if (run / name).exists():
            shutil.copyfile(run / name, folder / name)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.experiments.archive",
        description="Keep a sweep's results, final episodes and training logs (no checkpoints, no "
        "notebooks) in a folder that `rspo_kit.experiments.report` reads like the sweep.",
    )
    ap.add_argument("out", help="the sweep's output folder")
    ap.add_argument("dest", help="the archive's folder (created; updated if it exists)")
    args = ap.parse_args(argv)
    try:
        names = archive_sweep(args.out, args.dest)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"archived {len(names)} finished cells of {args.out} into {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
