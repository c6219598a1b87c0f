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
``ALGO``, ``SWAP`` (true, false, "control", ...) and ``SEED`` are ``algo.name``, ``variant`` (rspo,
plain, control, ...) and ``train.seed`` (``config_key``), so archived grids of notebook 04's
UPPERCASE parameters and grids of config fields report in the same columns.

Cells run in separate processes, at most one per CPU core. A notebook with a ``THREADS`` parameter
gets the preset's ``train.threads``, else cores // workers torch threads, unless ``THREADS`` is
given, so parallel cells do not fight over the cores. ``--backend ray`` runs each cell as a Ray task
instead, on a cluster (``--address``) or on a Ray of this machine, with the same files and resume
rules; a cell whose worker dies is retried from its checkpoint (``rspo_kit.experiments.ray_backend``).
papermill (the ``notebook`` extra) is imported only when a sweep runs. ``--env-module M`` imports a
module of one's own that registers the env of the cells (``-p ENV mygame``) and passes it to every
cell as its ``ENV_MODULE``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import itertools
import json
import math
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from rspo_kit.envs.registry import ENV_MODULE_HELP, EnvModuleError, load_env_modules, portable_env_module
from rspo_kit.experiments.ray_backend import RayMissing
from rspo_kit.paths import atomic_write_text
from rspo_kit.records.files import read_json
from rspo_kit.records.metrics import METRICS_FILE
from rspo_kit.records.notebook import RESULTS_FILE, NoResults, has_results, read_results

KERNEL_NAME = "rspo-kit"  # registered from this virtualenv by ensure_kernel() / `make kernel`
MANIFEST = "sweep.json"
BACKENDS = ("local", "ray")  # where cells run: a local process pool, or Ray tasks (ray_backend)
Backend = Literal["local", "ray"]
SEED_KEY = "train.seed"  # the key whose values are replicates: summaries average over it
CURVE_X = "curve_env_steps"  # recorded list: the x of every learning curve a notebook records
# the two budgets a curve is drawn against (recorded lists of notebook 04), with their axis titles: env
# steps (a user's cost: actor and explorer together) and updates of A (the paper's accounting)
CURVE_AXES = {
    CURVE_X: "environment steps (actor + explorer)",
    "curve_actor_updates": "updates of the actor A",
}
REFERENCE_RUN = "warmstart_run"  # the run folder of --reference-run, beside the cells

# notebook 04's parameters that are config fields, under the field's name (the short names of a
# grid, and the UPPERCASE parameters that grids of archived sweeps used)
CONFIG_KEYS = {
    "algo": "algo.name",
    "ALGO": "algo.name",
    "variant": "variant",
    "VARIANT": "variant",
    "SWAP": "variant",
    "seed": "train.seed",
    "SEED": "train.seed",
    "ENV": "env.name",
    "ENV_MODULE": "env.module",
    "ITERATIONS": "train.iterations",
    "LR": "algo.lr",
    "GROUP_SIZE": "algo.group_size",
    "MAX_ENV_STEPS": "train.max_env_steps",
    "UPDATES": "train.updates",
    "MAX_STEPS": "env.max_steps",
    "EVAL_N": "train.eval_n",
    "EVAL_EVERY": "train.eval_every",
    "EVAL_SPLIT": "train.eval_split",
    "FINAL_EVAL_SPLIT": "train.final_eval_split",
    "FINAL_EVAL_N": "train.final_eval_n",
    "FINAL_EVAL_SAMPLED": "train.final_eval_sampled",
    "OUTCOME_MODE": "reward.outcome_mode",
    "MISALIGN_EPS": "reward.misalign_eps",
    "SFT_UPDATES": "policy.sft_updates",
    "SFT_MINUTES": "policy.sft_minutes",
    "SFT_DEMO_TASKS": "policy.sft_demo_tasks",
    "EXPLORER_LR": "swap.explorer_lr",
    "EXPLORER_UPDATES": "swap.explorer_updates",
    "REPLAY_FILTER": "swap.replay_filter",
    "REPLAY_RATIO": "swap.replay_ratio",
    # archived grids named the field before it was renamed: offpolicy_weight is today's offpolicy_clip
    "OFFPOLICY_WEIGHT": "swap.offpolicy_clip",
    "OFFPOLICY_CLIP": "swap.offpolicy_clip",
    "swap.offpolicy_weight": "swap.offpolicy_clip",
}
# a grid's short names for notebook 04's parameters
SHORT_NAMES = {"variant": "VARIANT", "algo": "ALGO", "seed": "SEED"}
# the variant of a boolean SWAP value (SWAP=true is RSPO)
VARIANT_OF_SWAP = {True: "rspo", False: "plain"}


def config_key(key: str, value: Any = None) -> tuple[str, Any]:
    """A grid key and value under the config field's name (``CONFIG_KEYS``); others as they are.

    >>> config_key("SWAP", True), config_key("SWAP", "control"), config_key("SEED", 2)
    (('variant', 'rspo'), ('variant', 'control'), ('train.seed', 2))
    >>> config_key("algo.lr", 3e-5), config_key("PRESET", "alfworld-40k")
    (('algo.lr', 3e-05), ('PRESET', 'alfworld-40k'))
    """
    name = CONFIG_KEYS.get(key, key)
    if name == "variant" and isinstance(value, bool):
        value = VARIANT_OF_SWAP[value]
    return name, value


def config_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters under their config names (``config_key``); an ``OVERRIDES`` dict as its dotted keys.

    >>> config_params({"ALGO": "gigpo", "SWAP": False, "OVERRIDES": {"algo.lr": 1e-4}})
    {'algo.name': 'gigpo', 'variant': 'plain', 'algo.lr': 0.0001}
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key == "OVERRIDES" and isinstance(value, Mapping):
            out.update(value)
        else:
            name, value = config_key(key, value)
            out[name] = value
    return out


def notebook_parameters(params: Mapping[str, Any], known: set[str] | None = None) -> dict[str, Any]:
    """What papermill passes for a cell's ``params``: dotted config fields into ``OVERRIDES`` (over a
    given ``OVERRIDES`` dict), ``variant``/``algo``/``seed`` as ``VARIANT``/``ALGO``/``SEED``, the
    rest as they are. ``known``: the notebook's parameters, to fail on a config field it cannot take.

    >>> notebook_parameters({"PRESET": "alfworld-40k", "variant": "rspo", "algo.lr": 1e-4, "train.seed": 1})
    {'PRESET': 'alfworld-40k', 'VARIANT': 'rspo', 'OVERRIDES': {'algo.lr': 0.0001, 'train.seed': 1}}
    """
    out: dict[str, Any] = {}
    overrides = dict(params.get("OVERRIDES") or {})
    for key, value in params.items():
        if "." in key:
            overrides[key] = value
        elif key != "OVERRIDES":
            out[SHORT_NAMES.get(key, key)] = value
    if overrides:
        if known is not None and "OVERRIDES" not in known:
            raise ValueError(f"config fields {sorted(overrides)} need a notebook with an OVERRIDES parameter")
        out["OVERRIDES"] = overrides
    return out


def check_config_fields(params: Mapping[str, Any]) -> None:
    """Every dotted key of ``params`` names a config field: a typo fails before any cell runs."""
    from rspo_kit.train.config import RunConfig

    cfg = RunConfig()
    for key in (k for k in params if "." in k):
        section, _, name = key.partition(".")
        part = getattr(cfg, section, None)
        if not dataclasses.is_dataclass(part) or name not in {f.name for f in dataclasses.fields(part)}:
            raise ValueError(f"grid or parameter key {key!r} is not a config field (section.field)")


# ------------------------------------------------------------------------------------------ grid
def expand_grid(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the last key varying fastest.

    >>> expand_grid({"algo.name": ["grpo", "gigpo"], "seed": [0, 1]})  # doctest: +NORMALIZE_WHITESPACE
    [{'algo.name': 'grpo', 'seed': 0}, {'algo.name': 'grpo', 'seed': 1},
     {'algo.name': 'gigpo', 'seed': 0}, {'algo.name': 'gigpo', 'seed': 1}]
    """
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"grid[{key!r}] must be a non-empty list of values, got {values!r}")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-") or "-"


def cell_name(params: Mapping[str, Any]) -> str:
    """A file name for a grid cell: ``KEY=value`` pairs joined by ``__``, in grid order.

    >>> cell_name({"algo.name": "gigpo", "variant": "rspo", "train.seed": 0})
    'algo.name=gigpo__variant=rspo__train.seed=0'
    >>> cell_name({"variant": "control", "algo.lr": 3e-4})
    'variant=control__algo.lr=0.0003'
    """
    return "__".join(f"{_fmt(k)}={_fmt(v)}" for k, v in params.items())


@dataclass(frozen=True)
class Cell:
    """One grid cell: its name, its grid values, where its notebook and run directory go."""

    name: str
    params: dict[str, Any]
    notebook: Path
    run_dir: Path


def plan(grid: Mapping[str, Sequence[Any]], out_dir: str | os.PathLike) -> list[Cell]:
    """The cells of a grid under ``out_dir``; names must be distinct."""
    out = Path(out_dir)
    cells = [
        Cell(cell_name(p), p, out / f"{cell_name(p)}.ipynb", out / cell_name(p)) for p in expand_grid(grid)
    ]
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise ValueError(f"grid values collide after making file names: {sorted(names)}")
    return cells


# ---------------------------------------------------------------------------------------- kernel
def ensure_kernel(name: str = KERNEL_NAME) -> str:
    """A Jupyter kernel ``name`` that runs this Python; registered (``--sys-prefix``) if missing.

    papermill is given this name explicitly, so a kernel "python3" of some other environment on the
    machine is never picked by accident.
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
        # not resolved: a venv's python is a symlink to the base interpreter that other venvs share
        if spec.argv and os.path.abspath(spec.argv[0]) == os.path.abspath(sys.executable):
            return name
    except NoSuchKernel:
        pass
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ipykernel",
            "install",
            "--sys-prefix",
            "--name",
            name,
            "--display-name",
            "Python (rspo_kit)",
        ],
        check=True,
        capture_output=True,
    )
    return name


# ------------------------------------------------------------------------------------------- run
@dataclass
class CellOutcome:
    name: str
    status: str  # "finished" (ran now), "skipped" (finished before), "failed", "pending" (not run here)
    seconds: float = 0.0
    error: str | None = None


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# Headless kernels: library progress bars (transformers, tqdm) would be stored as widget outputs.
HEADLESS_ENV = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


@contextlib.contextmanager
def _output_to(log_path: Path):
    """Send this process's stdout/stderr file descriptors (and so its kernels') to ``log_path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _run_cell(
    notebook: str,
    output: str,
    parameters: dict,
    kernel_name: str,
    threads: int | None,
    timeout_s: float | None,
    cwd: str | None = None,
) -> tuple[float, str | None]:
    """Execute one cell in this (worker) process; returns (seconds, error or None).

    The kernel's own stdout/stderr (startup warnings, crashes) go to ``<cell>.log`` next to the
    output notebook; what the notebook prints is in the notebook. ``cwd``: the kernel's working
    directory (None: this process's).
    """
    import papermill as pm

    os.environ.update(HEADLESS_ENV)
    if threads:  # inherited by the kernel: BLAS/OpenMP pools of numpy and torch stay this small
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
    start = time.perf_counter()
    try:
        with _output_to(Path(output).with_suffix(".log")):
            pm.execute_notebook(
                notebook,
                output,
                parameters=parameters,
                kernel_name=kernel_name,
                progress_bar=False,
                execution_timeout=timeout_s,
                cwd=cwd,
            )
    except pm.PapermillExecutionError as err:  # a failing cell is reported, the others go on
        return time.perf_counter() - start, f"{err.ename}: {err.evalue} (cell {err.exec_count}; see {output})"
    except Exception as err:  # the kernel died, a timeout, a missing kernel
        lines = str(err).strip().splitlines()
        return time.perf_counter() - start, f"{type(err).__name__}: {lines[-1] if lines else ''}"
    try:
        read_results(output)
    except NoResults as err:
        return time.perf_counter() - start, f"finished without recording results: {err}"
    return time.perf_counter() - start, None


def cell_progress(run_dir: Path) -> str | None:
    """Where a cell's run stands, from ``<run_dir>/metrics.jsonl`` (the trainer's log): iteration, env
    steps, the last evaluation's success (and its mean score where that is not the success).

    None if the cell's run has logged nothing (yet), e.g. a notebook that is no training run.
    """
    path = Path(run_dir) / METRICS_FILE
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    except (OSError, ValueError):  # not there, or caught halfway through a write
        return None
    if not rows or not isinstance(rows[-1], dict) or "iteration" not in rows[-1]:
        return None
    text = f"iteration {rows[-1]['iteration']}"
    steps = rows[-1].get("rollout/cumulative_env_steps")
    if steps is not None:
        text += f", {steps:,.0f} env steps"
    evals = [r for r in rows if isinstance(r, dict) and r.get("eval/success") is not None]
    if evals:
        success, score = evals[-1]["eval/success"], evals[-1].get("eval/score")
        text += f", last eval {100 * success:.1f}%"
        if score is not None and abs(score - success) > 1e-9:  # a score of its own (WebShop: points)
            text += f" (score {score:.1f})"
    return text


def preset_threads(parameters: Mapping[str, Any]) -> int | None:
    """The torch threads the ``PRESET`` parameter's preset fixes (a protocol's ``train.threads``)."""
    from rspo_kit.train.config import PRESETS

    return PRESETS.get(parameters.get("PRESET"), {}).get("train", {}).get("threads")


def _notebook_parameters(notebook: Path) -> set[str]:
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
        from rspo_kit.experiments.ray_backend import ray_cells, recorded_address

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
            from rspo_kit.experiments.ray_backend import execute_on_ray

            ran = execute_on_ray(notebook.resolve(), jobs, kernel, on_ray, timeout_s, progress_s, say)
        else:
            ran = _execute(notebook, jobs, kernel, n_workers, threads, timeout_s, progress_s, say)
        for c, seconds, error in ran:
            outcomes[c.name] = CellOutcome(c.name, "failed" if error else "finished", seconds, error)
            say(f"  {c.name}: {'FAILED ' + error if error else 'finished'} ({seconds:.0f} s)")
    return [outcomes[c.name] for c in cells]


def _execute(
    notebook: Path,
    jobs: list[tuple[Cell, dict]],
    kernel: str,
    n_workers: int,
    threads: int,
    timeout_s: float | None,
    progress_s: float | None,
    say: Callable[[str], None],
):
    """Run the cells in a pool of ``n_workers`` processes; yields (cell, seconds, error) as each ends.

    Stopping the sweep (Ctrl-C, SIGTERM) cancels the queued cells and terminates the running ones.
    """
    # spawn: the caller may be a kernel with torch's thread pools running, which fork would copy
    with _terminate_as_interrupt():
        others = set(multiprocessing.active_children())  # the caller's own children: not ours to stop
        pool = ProcessPoolExecutor(n_workers, mp_context=get_context("spawn"), initializer=_worker_init)
        try:
            futures = {
                pool.submit(_run_cell, str(notebook), str(c.notebook), params, kernel, threads, timeout_s): c
                for c, params in jobs
            }
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=progress_s, return_when=FIRST_COMPLETED)
                for job in done:
                    yield (futures[job], *job.result())
                if not done:  # a long quiet stretch: say where the running cells are
                    for job in pending:
                        progress = cell_progress(futures[job].run_dir)
                        if job.running() and progress:
                            say(f"  {futures[job].name}: {progress}")
        except BaseException:  # Ctrl-C, SIGTERM (see _terminate_as_interrupt) or a bug here
            _stop_workers(pool, others)
            say(
                "sweep stopped: running cells were killed and run again next time (from their checkpoints where "
                "the notebook continues a run); queued ones did not start"
            )
            raise
        pool.shutdown()


def _worker_init() -> None:
    """In each pool worker: die with the sweep's process, even when it is killed with SIGKILL.

    Without this, a worker outlives a killed parent and goes on running the cells already queued to
    it. A dying worker takes its papermill kernel along (ipykernel exits when its parent changes).
    """
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))
        if os.getppid() == 1:  # the parent died before prctl: nobody is left to report to
            os._exit(1)


def _stop_workers(pool: ProcessPoolExecutor, others: set) -> None:
    """Cancel queued cells and terminate the pool's workers (and with them their kernels) now: every
    child process started since the pool was made, not the ``others`` the caller had before."""
    pool.shutdown(wait=False, cancel_futures=True)
    workers = [proc for proc in multiprocessing.active_children() if proc not in others]
    for proc in workers:
        proc.terminate()
    for proc in workers:
        proc.join(timeout=10)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """Turn SIGTERM (``kill``, a job scheduler) into KeyboardInterrupt while a sweep runs, so that it
    stops its workers on the way out; only possible, and only done, in the main thread."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# ------------------------------------------------------------------------------------- aggregate
# two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (above 30: the normal 1.96
# plus the first-order correction 2.4/df, within 0.002 of the exact value)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (for 95% intervals)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df


def mean_ci(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval of independent replicates (NaN bounds for a single value).

    >>> [round(v, 3) for v in mean_ci([0.2, 0.4, 0.6])]
    [0.4, -0.097, 0.897]
    """
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if len(x) == 1:
        return (mean, math.nan, math.nan)
    half = t_quantile_975(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return (mean, mean - half, mean + half)


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str)) or value is None


def config_manifest(manifest: Mapping[str, Any]) -> dict:
    """A sweep's manifest with its keys, cells' values and fixed parameters under their config names
    (``config_params``): ``ALGO=gigpo__SWAP=false__SEED=0`` reads as algo.name gigpo, variant plain,
    train.seed 0, like ``algo.name=gigpo__variant=plain__train.seed=0``."""
    keys = [config_key(k)[0] for k in manifest.get("keys", [])]
    cells = {name: config_params(params) for name, params in manifest.get("cells", {}).items()}
    parameters = config_params(manifest.get("parameters", {}))
    return {**manifest, "keys": list(dict.fromkeys(keys)), "cells": cells, "parameters": parameters}


def load_sweep(out_dir: str | os.PathLike) -> tuple[dict, list[dict]]:
    """The manifest (``config_manifest``: keys under config names) and, per cell with results,
    ``{"cell", grid values..., results...}`` (all values), in the order the grids listed the cells
    (e.g. plain, RSPO, control). A cell's results are its output notebook's; a cell without a
    notebook (an archive, ``rspo_kit.experiments.archive``) is read from its run folder's
    ``results.json``. A file that is not valid JSON is a ``RecordError`` naming it."""
    out = Path(out_dir)
    path = out / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"no {MANIFEST} in {out}: not a sweep folder")
    manifest = config_manifest(read_json(path))
    rows = []
    for name, params in manifest["cells"].items():
        notebook, archived = out / f"{name}.ipynb", out / name / RESULTS_FILE
        try:
            results = read_results(notebook)
        except NoResults:
            if notebook.exists() or not archived.exists():
                continue
            results = read_json(archived)
        rows.append({"cell": name, **params, **results})
    return manifest, rows


def aggregate(out_dir: str | os.PathLike, *, curve: str = "curve_success") -> pd.DataFrame:
    """One row per finished cell: its grid values and every scalar it recorded.

    Writes ``results.csv`` (this table), ``summary.csv`` (``summarize`` over seeds) and, when the
    cells recorded ``curve_env_steps`` and ``curve`` lists, ``curves.html`` (``curve_figure``), and
    ``curves_updates.html`` against A's updates where they recorded ``curve_actor_updates``.
    Unfinished cells are left out; ``table.attrs`` says how many cells the sweep has in all.
    """
    out = Path(out_dir)
    manifest, rows = load_sweep(out)
    table = write_aggregate(rows, manifest["keys"], out, curve=curve, name=out.name)
    table.attrs.update(cells=len(manifest["cells"]), finished=len(rows), keys=manifest["keys"])
    return table


def write_aggregate(
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    into: Path,
    *,
    curve: str = "curve_success",
    prefix: str = "",
    name: str = "",
) -> pd.DataFrame:
    """What ``aggregate`` writes, for ``rows`` as ``load_sweep`` returns them: the table of their
    scalars to ``into/<prefix>results.csv``, its ``summarize`` over seeds by the grid ``keys`` to
    ``<prefix>summary.csv`` and, where recorded, the ``curve`` of every row to ``<prefix>curves.html``
    (titled with ``name``). Returns the table."""
    table = pd.DataFrame([{k: v for k, v in r.items() if _scalar(v)} for r in rows])
    table.to_csv(into / f"{prefix}results.csv", index=False)
    by = [k for k in keys if k != SEED_KEY and k in table]
    summary = summarize(table, by) if len(table) else pd.DataFrame()
    summary.to_csv(into / f"{prefix}summary.csv", index=False)
    for x, (page, what) in {
        CURVE_X: ("curves", "env steps"),
        "curve_actor_updates": ("curves_updates", "updates of A"),
    }.items():
        if any(x in r and curve in r for r in rows):
            spec = curve_figure(rows, by, curve, x=x)
            write_figure_html(
                spec, into / f"{prefix}{page}.html", summary, title=f"{name}: {curve} vs {what}"
            )
    return table


def summarize(table: pd.DataFrame, by: Sequence[str], metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean and 95% CI over replicates (usually seeds) per group: one row per group and metric.

    ``metrics``: numeric result columns (default: every numeric column that is not a grid key).
    """
    by = list(by)
    if metrics is None:
        skip = {*by, SEED_KEY, "cell"}
        metrics = [c for c in table.columns if c not in skip and pd.api.types.is_numeric_dtype(table[c])]
        metrics = [m for m in metrics if not pd.api.types.is_bool_dtype(table[m])]
    groups = table.groupby(by, sort=False, dropna=False) if by else [((), table)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            mean, low, high = mean_ci(part[metric].astype(float).tolist())
            values = part[metric].dropna()
            stats = {"metric": metric, "n": len(values), "mean": mean, "ci_low": low, "ci_high": high}
            rows.append(dict(zip(by, key, strict=True)) | stats)
    return pd.DataFrame(rows)


# one colour per group in the figures of sweeps (curves, success by kind)
GROUP_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _trace(x: list, y: list, name: str, group: str, line: dict, **extra: Any) -> dict:
    trace = {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": name, "legendgroup": group}
    return trace | {"line": line, **extra}


def curve_figure(
    rows: Sequence[Mapping[str, Any]], by: Sequence[str], curve: str = "curve_success", x: str = CURVE_X
) -> dict:
    """A plotly figure spec (plain dict): each cell's curve against ``x``, one colour per group.

    ``x`` is a recorded list of ``CURVE_AXES``: env steps (default) or A's updates
    (``curve_actor_updates``), the two budgets runs are compared at. Thin lines are single cells
    (seeds); the thick line of a group is the mean of its cells' curves interpolated onto a shared grid
    of ``x`` (up to the shortest run of the group). Plain data, so the library needs no plotly:
    ``plotly.graph_objects.Figure(spec)`` shows it.
    """
    if x not in CURVE_AXES:
        raise ValueError(f"curve_figure: x must be one of {sorted(CURVE_AXES)}, got {x!r}")
    axis = x
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        if axis in r and curve in r:
            groups.setdefault(tuple(r.get(k) for k in by), []).append(r)
    data = []
    for i, (key, members) in enumerate(groups.items()):
        label = ", ".join(f"{k}={_fmt(v)}" for k, v in zip(by, key, strict=True)) or "all"
        color = GROUP_COLORS[i % len(GROUP_COLORS)]
        curves = []
        for r in members:
            points = [(x, y) for x, y in zip(r[axis], r[curve], strict=True) if y is not None]
            xs, ys = [x for x, _ in points], [y for _, y in points]
            curves.append((np.asarray(xs, float), np.asarray(ys, float)))
            line = {"color": color, "width": 1}
            data.append(
                _trace(xs, ys, r["cell"], label, line, showlegend=False, opacity=0.5, mode="lines+markers")
            )
        curves = [(x, y) for x, y in curves if len(x)]
        if curves:
            top = min(x.max() for x, _ in curves)
            grid = np.linspace(0.0, top, 20) if top > 0 else np.zeros(1)
            mean = np.mean([np.interp(grid, x, y) for x, y in curves], axis=0)
            name = f"{label} (mean of {len(curves)})"
            data.append(_trace(grid.tolist(), mean.tolist(), name, label, {"color": color, "width": 3}))
    layout = {
        "xaxis": {"title": {"text": CURVE_AXES[axis]}},
        "yaxis": {"title": {"text": curve.removeprefix("curve_")}},
        "legend": {"title": {"text": ", ".join(by)}},
    }
    return {"data": data, "layout": layout}


def _plotly_js(folder: Path) -> str:
    """Script tags for plotly.js: a copy next to the page (from the installed plotly) for offline use,
    and the CDN's copy of the same version when that file is missing, e.g. a page committed without it."""
    import importlib.util

    try:
        from plotly.offline import get_plotlyjs_version

        cdn = f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"
    except ImportError:
        cdn = "https://cdn.plot.ly/plotly-2.35.2.min.js"
    spec = importlib.util.find_spec("plotly")  # locates the package without importing it
    if spec and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
        if bundled.is_file():
            if not (folder / "plotly.min.js").is_file():
                shutil.copyfile(bundled, folder / "plotly.min.js")
            fallback = f"window.Plotly || document.write('<script src=\"{cdn}\"><\\/script>')"
            return f"<script src='plotly.min.js'></script><script>{fallback}</script>"
    return f"<script src='{cdn}'></script>"


def write_figure_html(spec: Mapping, path: Path, table: pd.DataFrame | None = None, title: str = "") -> Path:
    """A standalone page: the figure (needs JavaScript; plotly.js offline when plotly is installed)
    and, readable without JavaScript, ``table`` as plain HTML."""
    path = Path(path)
    scripts = _plotly_js(path.parent)
    page = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{title}</title>{scripts}</head><body>",
        f"<h3>{title}</h3><div id='fig' style='height:520px'></div>",
        "<noscript>The figure needs JavaScript; the table below does not.</noscript>",
        f"<script>Plotly.newPlot('fig', {json.dumps(spec.get('data', []))}, {json.dumps(spec.get('layout', {}))});</script>",
    ]
    if table is not None and len(table):
        page.append(table.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"))
    page.append("</body></html>")
    atomic_write_text(path, "\n".join(page))
    return path


# ------------------------------------------------------------------------------------ reference
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


# ------------------------------------------------------------------------------------------- CLI
def parse_value(text: str) -> Any:
    """A grid or -p value given as text: JSON or a Python literal if it parses as one, else the text."""
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            pass
    return text


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
