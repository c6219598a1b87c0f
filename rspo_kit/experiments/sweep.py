"""Run one parameterised notebook over a grid of parameters with papermill: in parallel, resumable.

    python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb --preset alfworld-40k \\
        --grid '{"algo.name": ["grpo", "gigpo"], "variant": ["plain", "rspo"], "train.seed": [0, 1, 2]}' \\
        --out runs/sweeps/alfworld-40k --workers 2

Every grid cell (one combination of values) is one papermill run of the notebook. Grid keys and
``-p`` parameters are the notebook's parameters, with three kinds of names (``notebook_parameters``):
a dotted config field (``algo.lr``) goes into the notebook's ``OVERRIDES`` dict, ``variant``,
``algo`` and ``seed`` into ``VARIANT``, ``ALGO`` and ``SEED``, and an UPPERCASE name is the
parameter itself; ``--preset`` passes ``PRESET`` (a protocol of ``rspo_kit.train.PRESETS``).

A cell's output notebook is named by its values (``cell_name``) and is also the record of whether it
finished: a cell whose output notebook carries a ``RSPO_RESULTS`` line (``rspo_kit.records.record``)
is skipped when the sweep runs again, a failed or killed one is run again. So an interrupted sweep
resumes by running the same command again. A rerun cell keeps its run directory, so a notebook that
continues from the checkpoints in its ``RUN_DIR`` (``04_training`` does) loses at most one iteration
of a killed run; ``fresh=True`` (``--fresh``) deletes them first and reruns such cells from scratch.
Stopping the sweep (Ctrl-C, ``kill``, even ``kill -9``) stops its running cells too: no worker or
kernel is left behind to run queued cells.

The output folder holds:

- ``sweep.json`` — the notebook, the grid keys, the fixed parameters and every cell's parameters;
- ``<cell>.ipynb`` — each executed notebook, and ``<cell>.log`` — its kernel's own stdout and stderr;
- ``<cell>/`` — each cell's run directory, passed as ``RUN_DIR`` if the notebook has that parameter;
- ``warmstart_run/`` — with ``--reference-run``: the preset's starting policy given the cells' final
  evaluation, which ``report --reference`` compares every variant with;
- ``results.csv``, ``summary.csv``, ``curves.html`` — written by ``aggregate``.

Reading a sweep (``load_sweep``) names its keys as config fields, whatever names its grid used:
notebook 04's parameters (``ALGO``, ``VARIANT``, ``SEED``, ...: ``rspo_kit.train.presets.NOTEBOOK_PARAMETERS``)
and the short names ``algo``, ``variant`` and ``seed`` are ``algo.name``, ``variant`` and ``train.seed``
(``config_key``), so grids of either kind of name and grids of config fields report in the same columns.

Cells run in separate processes, at most one per CPU core. A notebook with a ``THREADS`` parameter
gets the preset's ``train.threads``, else cores // workers torch threads, unless ``THREADS`` is
given, so parallel cells do not fight over the cores. ``--backend ray`` runs each cell as a Ray task
instead, on a cluster (``--address``) or on a Ray of this machine, with the same files and resume
rules; a cell whose worker dies is retried from its checkpoint (``rspo_kit.experiments.ray_backend``).
papermill (the ``notebook`` extra) is imported only when a sweep runs. ``--env-module M`` imports a
module of one's own that registers the env of the cells (``-p ENV mygame``) and passes it to every
cell as its ``ENV_MODULE``.

This module runs a sweep and is its command line; the parts are modules of ``rspo_kit.experiments``:
the grid, its cell names and each cell's notebook parameters (``grid``), one cell in one process
(``cells``), the two backends (``local_backend``, ``ray_backend``), and the results read back as
tables and figures (``aggregation``, ``figures``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from rspo_kit.envs.registry import ENV_MODULE_HELP, EnvModuleError, load_env_modules, portable_env_module
from rspo_kit.experiments.aggregation import aggregate
from rspo_kit.experiments.cells import KERNEL_NAME, CellOutcome, ensure_kernel, usable_cores
from rspo_kit.experiments.grid import (
    MANIFEST,
    Cell,
    check_config_fields,
    config_params,
    notebook_parameters,
    parse_value,
    plan,
)
from rspo_kit.experiments.local_backend import execute_locally
from rspo_kit.experiments.ray_backend import RayMissing, execute_on_ray, ray_cells, recorded_address
from rspo_kit.paths import atomic_write_text
from rspo_kit.records.notebook import has_results

BACKENDS = ("local", "ray")  # where cells run: a local process pool, or Ray tasks (ray_backend)
Backend = Literal["local", "ray"]
REFERENCE_RUN = "warmstart_run"  # the run folder of --reference-run, beside the cells


def preset_threads(parameters: Mapping[str, Any]) -> int | None:
    """The torch threads the ``PRESET`` parameter's preset fixes (a protocol's ``train.threads``)."""
    from rspo_kit.train.config import PRESETS

    return PRESETS.get(parameters.get("PRESET"), {}).get("train", {}).get("threads")


def _notebook_parameters(notebook: Path) -> set[str]:
    """The names of ``notebook``'s parameters, as papermill reads its parameters cell."""
    import papermill as pm

    return set(pm.inspect_notebook(str(notebook)))


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (created if missing) between processes; a no-op without ``fcntl``."""
    try:
        import fcntl
    except ImportError:  # Windows: sweeps started one at a time need no lock
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_manifest(
    out: Path,
    notebook: Path,
    grid: Mapping,
    parameters: Mapping,
    cells: list[Cell],
    backend: str = "local",
    address: str | None = None,
) -> None:
    """Create or extend ``sweep.json``: cells of earlier invocations with other grids are kept; the
    notebook, fixed parameters, ``backend`` and ``address`` (Ray's; None for the local pool) are this
    invocation's.

    Safe when several sweeps into one ``out`` start at once (one cell each, a core each): the read and
    the write happen under a lock, through a temporary file of this process's own (``atomic_write_text``).
    """
    path = out / MANIFEST
    with _locked(out / f".{MANIFEST}.lock"):
        manifest = json.loads(path.read_text()) if path.exists() else {"cells": {}}
        keys = list(dict.fromkeys([*manifest.get("keys", []), *grid]))
        manifest.update(notebook=str(notebook), keys=keys, parameters=dict(parameters))
        manifest.update(backend=backend, address=address)
        manifest["cells"].update({c.name: c.params for c in cells})
        atomic_write_text(path, json.dumps(manifest, indent=1, default=str) + "\n")


def sweep_status(grid: Mapping[str, Sequence[Any]], out_dir: str | os.PathLike) -> list[CellOutcome]:
    """Which cells of a grid have finished under ``out_dir``, without running any ("skipped" or "pending").

    For reading a sweep that still runs elsewhere (e.g. in the background) or was stopped halfway.
    """
    return [
        CellOutcome(c.name, "skipped" if has_results(c.notebook) else "pending") for c in plan(grid, out_dir)
    ]


def run_sweep(
    notebook: str | os.PathLike,
    grid: Mapping[str, Sequence[Any]],
    out_dir: str | os.PathLike,
    *,
    parameters: Mapping[str, Any] | None = None,
    workers: int = 1,
    kernel_name: str | None = None,
    timeout_s: float | None = None,
    fresh: bool = False,
    progress_s: float | None = 600.0,
    log: Callable[[str], None] | None = print,
    backend: Backend = "local",
    address: str | None = None,
    cpus_per_cell: float | None = None,
    gpus_per_cell: float | None = None,
) -> list[CellOutcome]:
    """Run ``notebook`` once per grid cell into ``out_dir`` (see the module docstring).

    ``parameters`` are passed to every cell (grid values win over them; both as ``notebook_parameters``
    names them: dotted config fields go into ``OVERRIDES``). ``timeout_s`` bounds each
    notebook cell's execution. Every ``progress_s`` seconds without a cell ending, the running
    cells' progress is logged (``cell_progress``; None: never). ``fresh`` deletes the run
    directories of unfinished cells first, so they start from scratch instead of from their
    checkpoints. ``backend``: "local", a pool of ``workers`` processes, or "ray", a Ray task per
    cell (``rspo_kit.experiments.ray_backend``: ``address``, else a Ray on this machine; each cell
    holds ``cpus_per_cell`` CPUs and ``gpus_per_cell`` GPUs, by default what its preset needs).
    Returns one outcome per grid cell, in grid order.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    notebook, out = Path(notebook), Path(out_dir)
    if not notebook.is_file():
        raise FileNotFoundError(f"no notebook at {notebook}")
    fixed = dict(parameters or {})
    on_ray, ray_address = None, None
    if backend == "ray":  # before any file is written: a missing Ray or a bad resource fails first
        ray_address = recorded_address(address)  # imports Ray: RayMissing without it
        on_ray = ray_cells(fixed, address, cpus_per_cell, gpus_per_cell)
        out = out.resolve()  # the tasks may run in another working directory, or on another node
    out.mkdir(parents=True, exist_ok=True)
    cells = plan(grid, out)
    _write_manifest(out, notebook, grid, fixed, cells, backend, ray_address)
    say = log or (lambda _msg: None)

    outcomes = {c.name: CellOutcome(c.name, "skipped") for c in cells if has_results(c.notebook)}
    todo = [c for c in cells if c.name not in outcomes]
    say(f"sweep {out}: {len(cells)} cells, {len(outcomes)} finished before, {len(todo)} to run")
    if todo:
        jobs = []
        known = _notebook_parameters(notebook)
        for c in cells:
            check_config_fields({**fixed, **c.params})
            notebook_parameters({**fixed, **c.params}, known)
        n_workers = max(1, min(workers, usable_cores(), len(todo)))
        if on_ray:
            threads = on_ray.threads
        else:
            threads = fixed.get("THREADS") or preset_threads(fixed) or max(1, usable_cores() // n_workers)
        for c in todo:
            if fresh:
                shutil.rmtree(c.run_dir, ignore_errors=True)  # a failed or killed run's checkpoints
            c.notebook.unlink(missing_ok=True)
            c.notebook.with_suffix(".log").unlink(missing_ok=True)
            params = notebook_parameters({**fixed, **c.params}, known)
            if "RUN_DIR" in known:
                params["RUN_DIR"] = str(c.run_dir)
            if "THREADS" in known:
                params.setdefault("THREADS", threads)
            jobs.append((c, params))
        kernel = kernel_name or ensure_kernel()
        if on_ray:
            ran = execute_on_ray(notebook.resolve(), jobs, kernel, on_ray, timeout_s, progress_s, say)
        else:
            ran = execute_locally(notebook, jobs, kernel, n_workers, threads, timeout_s, progress_s, say)
        for c, seconds, error in ran:
            outcomes[c.name] = CellOutcome(c.name, "failed" if error else "finished", seconds, error)
            say(f"  {c.name}: {'FAILED ' + error if error else 'finished'} ({seconds:.0f} s)")
    return [outcomes[c.name] for c in cells]


def reference_run(
    preset_name: str,
    out_dir: str | os.PathLike,
    parameters: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = print,
) -> Path:
    """The preset's starting policy given the cells' final evaluation, in ``OUT/warmstart_run``: no
    training (``train.iterations=0``), the preset's final splits, greedy and sampled, so that
    ``report OUT --reference OUT/warmstart_run`` compares every variant with where it started. Done
    once: a folder with its final episodes is kept. ``parameters``: the sweep's fixed ones (their
    config fields apply, e.g. ``env.max_steps``). Run before the cells, it also installs the preset's
    warm start (``policy.warmstart_from``) before parallel cells look for it.
    """
    from rspo_kit.records.episodes import EPISODES_FILE
    from rspo_kit.train import preset, train

    run_dir = Path(out_dir) / REFERENCE_RUN
    if (run_dir / EPISODES_FILE).exists():
        return run_dir
    fields = config_params(dict(parameters or {}))
    cfg = preset(preset_name, env=fields.get("env.name"))
    for key, value in fields.items():
        if "." in key and key not in ("env.name", "train.seed", "algo.name"):
            cfg.override(key, value)
    for key, value in {"train.iterations": 0, "train.eval_n": 0, "train.progress_bar": False}.items():
        cfg.override(key, value)
    cfg.override("train.run_dir", str(run_dir))
    shutil.rmtree(run_dir, ignore_errors=True)  # a reference run killed halfway
    (log or (lambda _msg: None))(f"reference run: {preset_name}'s starting policy, evaluated into {run_dir}")
    train(cfg.validate())
    return run_dir


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.experiments.sweep",
        description="Run a parameterised notebook over a grid with papermill (resumable), then aggregate.",
    )
    ap.add_argument("notebook", help="the notebook to run, e.g. notebooks/04_training.ipynb")
    ap.add_argument(
        "--grid",
        required=True,
        help="JSON object of lists: config fields, variant, or notebook parameters, e.g. "
        '\'{"algo.name": ["grpo", "gigpo"], "variant": ["plain", "rspo"], "train.seed": [0, 1, 2]}\'',
    )
    ap.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    ap.add_argument(
        "--workers", type=int, default=1, help="parallel cells of the local backend (capped at the CPU cores)"
    )
    ap.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="local: a process pool on this machine; ray: a Ray task per cell (the cluster extra: "
        "pip install -e '.[cluster]')",
    )
    ap.add_argument(
        "--address",
        default=None,
        help="with --backend ray: the Ray cluster to run on (host:port of `ray start --head`, or auto); "
        "default: a Ray started on this machine, sized to its cores. OUT must be a path every node sees",
    )
    ap.add_argument(
        "--cpus-per-cell",
        type=float,
        default=None,
        metavar="N",
        help="with --backend ray: CPUs each cell holds, its torch threads (default: the preset's threads, else 1)",
    )
    ap.add_argument(
        "--gpus-per-cell",
        type=float,
        default=None,
        metavar="N",
        help="with --backend ray: GPUs each cell holds (default: 1 for a preset on a pretrained model, else 0)",
    )
    ap.add_argument(
        "--preset", default=None, help="the PRESET of every cell, e.g. alfworld-40k or webshop-7k"
    )
    ap.add_argument(
        "--env-module",
        action="append",
        default=[],
        metavar="MODULE",
        help=f"{ENV_MODULE_HELP}; every cell gets it as its ENV_MODULE",
    )
    ap.add_argument(
        "--reference-run",
        action="store_true",
        help=f"first evaluate the preset's starting policy as the cells' final evaluation into "
        f"OUT/{REFERENCE_RUN} (once; `report OUT --reference OUT/{REFERENCE_RUN}` compares with it)",
    )
    ap.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("KEY", "VALUE"),
        help="a parameter for every cell: a config field (algo.lr 3e-5) or a notebook parameter "
        "(THREADS 1); the value is parsed as JSON if it is JSON",
    )
    ap.add_argument(
        "--kernel", default=None, help=f"Jupyter kernel (default: {KERNEL_NAME}, registered if missing)"
    )
    ap.add_argument("--timeout", type=float, default=None, help="seconds one notebook cell may run")
    ap.add_argument(
        "--progress-every",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="while no cell ends, print the running cells' progress this often (0: never)",
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="rerun unfinished cells from scratch: delete their run directories (and checkpoints) first",
    )
    args = ap.parse_args(argv)
    ray_only = {
        "--address": args.address,
        "--cpus-per-cell": args.cpus_per_cell,
        "--gpus-per-cell": args.gpus_per_cell,
    }
    given = [flag for flag, value in ray_only.items() if value is not None]
    if given and args.backend != "ray":
        ap.error(f"{', '.join(given)} go with --backend ray")
    grid = json.loads(args.grid)
    if not isinstance(grid, dict):
        ap.error("--grid must be a JSON object of lists")
    parameters = {k: parse_value(v) for k, v in args.parameter}
    if args.preset:
        from rspo_kit.train.config import PRESETS

        if args.preset not in PRESETS:
            ap.error(f"--preset {args.preset!r} is not a preset; choose one of {', '.join(sorted(PRESETS))}")
        parameters["PRESET"] = args.preset
    if args.reference_run and "PRESET" not in parameters:
        ap.error("--reference-run evaluates a preset's starting policy: give --preset")
    try:
        load_env_modules(args.env_module)  # here too: a module that does not load fails before any cell
    except EnvModuleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.env_module:
        parameters["ENV_MODULE"] = portable_env_module(",".join(args.env_module))  # cells run elsewhere
    try:
        check_config_fields({**parameters, **{k: None for k in grid}})
        if args.reference_run:
            reference_run(parameters["PRESET"], args.out, parameters)
        outcomes = run_sweep(
            args.notebook,
            grid,
            args.out,
            parameters=parameters,
            workers=args.workers,
            kernel_name=args.kernel,
            timeout_s=args.timeout,
            fresh=args.fresh,
            progress_s=args.progress_every or None,
            backend=args.backend,
            address=args.address,
            cpus_per_cell=args.cpus_per_cell,
            gpus_per_cell=args.gpus_per_cell,
        )
    except RayMissing as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the workers are already stopped
        print("rerun the same command to resume", file=sys.stderr)
        return 130
    except (FileNotFoundError, ValueError) as err:  # a mistyped field, preset or path: before any cell
        print(f"error: {err}", file=sys.stderr)
        return 2
    table = aggregate(args.out)
    failed = [o for o in outcomes if o.status == "failed"]
    print(f"\n{table.attrs['finished']} of {table.attrs['cells']} cells finished; {len(failed)} failed")
    summary = pd.read_csv(Path(args.out) / "summary.csv") if len(table) else pd.DataFrame()
    if len(summary):
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(summary.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for name in ("results.csv", "summary.csv", "curves.html"):
        if (Path(args.out) / name).exists():
            print(f"wrote {Path(args.out) / name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
