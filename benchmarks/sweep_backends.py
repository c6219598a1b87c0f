"""Per-cell overhead of the sweep's Ray backend against the local process pool, side by side.

The smoke grid of tests/test_sweep_ray.py (notebook 04, smoke preset on chain-4x2, variant x seed,
2 iterations, one torch thread per cell) runs into a fresh folder on three backends, two cells at a
time, in rounds that alternate them so that load on the machine hits all alike:

- ``pool``: the local process pool (``--workers 2``);
- ``ray``: the Ray backend starting a Ray of this machine (2 CPUs) and stopping it, as
  ``sweep --backend ray`` without ``--address`` does;
- ``ray, joined``: the Ray backend on a Ray already running (a cluster's case: started once, outside).

Per sweep: its wall time, the cells' own time (papermill inside the worker, what the notebook costs
on any backend) and the overhead per cell, the core-seconds outside the notebooks divided by the
cells: (2 x wall - sum of the cells' own seconds) / cells. It holds starting the pool or Ray and the
workers, queueing, returning results and the cores left idle while the last cell runs (the same
for every backend). Medians over the rounds.

    .venv/bin/python benchmarks/sweep_backends.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rspo_kit.experiments import run_sweep
from rspo_kit.experiments.ray_backend import import_ray

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "notebooks" / "04_training.ipynb"
SMOKE = {"PRESET": "smoke", "ENV": "chain-4x2", "THREADS": 1, "INTERACTIVE": False, "ITERATIONS": 2}
GRID = {"variant": ["plain", "rspo"], "train.seed": [0, 1]}
SLOTS = 2  # cells at a time: two workers, or two CPUs of Ray at one CPU per cell


def one_sweep(backend: str, folder: Path) -> dict[str, float]:
    start = time.perf_counter()
    outcomes = run_sweep(TRAINING, GRID, folder, parameters=SMOKE, workers=SLOTS, backend=backend, log=None)
    wall = time.perf_counter() - start
    failed = [o.error for o in outcomes if o.status != "finished"]
    if failed:
        raise RuntimeError(f"{backend}: cells failed: {failed}")
    own = [o.seconds for o in outcomes]
    return {"wall": wall, "cell": statistics.median(own), "overhead": (SLOTS * wall - sum(own)) / len(own)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    ray = import_ray()
    runs: dict[str, list[dict[str, float]]] = {"pool": [], "ray": [], "ray, joined": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            runs["pool"].append(one_sweep("local", Path(tmp) / f"pool{k}"))
            runs["ray"].append(one_sweep("ray", Path(tmp) / f"ray{k}"))
            ray.init(address="local", num_cpus=SLOTS, include_dashboard=False, log_to_driver=False)
            try:
                runs["ray, joined"].append(one_sweep("ray", Path(tmp) / f"joined{k}"))
            finally:
                ray.shutdown()
            print(f"round {k + 1}: " + ", ".join(f"{b} {r[-1]['wall']:.1f} s" for b, r in runs.items()))
    cells = len(GRID["variant"]) * len(GRID["train.seed"])
    print(f"\n{cells} smoke cells, {SLOTS} at a time; medians of {args.rounds} rounds")
    print("| backend | sweep wall s | a cell's own s | overhead per cell s |")
    print("|---|---|---|---|")
    for backend, rows in runs.items():
        wall, cell, overhead = (
            statistics.median(r[key] for r in rows) for key in ("wall", "cell", "overhead")
        )
        print(f"| {backend} | {wall:.1f} | {cell:.1f} | {overhead:.1f} |")


if __name__ == "__main__":
    main()
