"""Sweep cells as Ray tasks: the same cells, folder layout and resume rules as the local process pool.

    python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb --preset alfworld-40k \\
        --grid '{"variant": ["plain", "rspo"], "train.seed": [0, 1, 2]}' --out /shared/sweeps/a40k \\
        --backend ray --address auto

Each cell is one Ray task that does what a pool worker does (``cells.run_cell``: papermill runs the
notebook into ``OUT/<cell>.ipynb`` with ``RUN_DIR`` ``OUT/<cell>/``), holding ``cpus_per_cell`` CPUs
(its torch threads) and ``gpus_per_cell`` GPUs. Without an address the sweep starts a Ray of its own
on this machine, sized to its cores, and stops it at the end; a process that has already joined a
Ray (``ray.init`` in a notebook) sweeps on that one. On a cluster of several nodes ``OUT`` must be a
path every node sees (a shared file system), and the checkout at the same path on every node.

Faults are told apart by where they happen. A cell that fails for its own reason (an exception in
the notebook, a bad parameter) returns its error as a value, so Ray never retries it: it fails once
and the other cells go on. A worker that dies (killed, OOM-killed, its node lost) fails the task
inside Ray, which runs it again (``MAX_RETRIES``); the rerun finds the cell's run directory and
notebook 04 continues from its last checkpoint, so the cell ends with the metrics of an
uninterrupted run. Stopping the sweep cancels its tasks and kills their workers; what they wrote is
resumable state, as with the local pool.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rspo_kit.experiments.cells import (
    KERNEL_NAME,
    cell_progress,
    ensure_kernel,
    run_cell,
    terminate_as_interrupt,
    usable_cores,
)

INSTALL_HINT = "pip install -e '.[cluster]'"
LOCAL = "local"  # the address recorded for a Ray the sweep started on this machine
MAX_RETRIES = 3  # reruns of a cell whose worker died; a cell's own errors are never retried


class RayMissing(ImportError):
    """``--backend ray`` without Ray installed."""


def import_ray():
    """The ``ray`` module, or ``RayMissing`` with the one line that installs it."""
    try:
        import ray
    except ImportError as err:
        raise RayMissing(f"the ray backend needs Ray, which is not installed: {INSTALL_HINT}") from err
    return ray


@dataclass(frozen=True)
class RayCells:
    """Where the cells run and what each one holds while it runs."""

    address: str | None  # a cluster's address ("auto": the one this machine belongs to); None: a local Ray
    cpus: float  # CPUs per cell
    gpus: float  # GPUs per cell
    threads: int  # torch threads per cell


def default_resources(parameters: Mapping[str, Any]) -> tuple[float, float]:
    """CPUs and GPUs a cell of the ``PRESET`` parameter's preset holds unless told: as many CPUs as it
    runs torch threads (``THREADS``, else the preset's, a protocol's 1, else 1), and one GPU for a
    preset on a pretrained model (the ``gpu`` preset's Qwen), none for the built-in small models.

    >>> default_resources({"PRESET": "alfworld-40k"}), default_resources({"PRESET": "gpu", "THREADS": 4})
    ((1.0, 0.0), (4.0, 1.0))
    """
    from rspo_kit.policy.models import GGUF_PRESETS
    from rspo_kit.policy.models import PRESETS as MODELS
    from rspo_kit.train.config import PRESETS

    fields = PRESETS.get(parameters.get("PRESET"), {})
    threads = parameters.get("THREADS") or fields.get("train", {}).get("threads") or 1
    model = fields.get("policy", {}).get("preset", "tiny")
    return float(threads), 0.0 if model in MODELS or model in GGUF_PRESETS else 1.0


def run_cell_on_node(
    notebook: str,
    output: str,
    parameters: dict,
    kernel_name: str,
    threads: int,
    timeout_s: float | None,
    gpus: float,
    cwd: str,
) -> tuple[float, str | None]:
    """One cell inside a Ray worker, on whichever node Ray chose: ``cells.run_cell`` there.

    The kernel starts in the sweep's working directory where the node has it (a shared checkout), so
    relative paths mean what they mean to the local pool. A cell that holds no GPU sees none: Ray
    hides the GPUs of other tasks, not those of a task that asked for none.
    """
    if not gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if kernel_name == KERNEL_NAME:  # another node's virtualenv registers its own
        ensure_kernel(kernel_name)
    return run_cell(
        notebook, output, parameters, kernel_name, threads, timeout_s, cwd if os.path.isdir(cwd) else None
    )


def recorded_address(address: str | None) -> str:
    """The address a sweep's manifest records: the one given, else that of the Ray this process has
    joined, else ``LOCAL`` (a Ray the sweep starts on this machine)."""
    ray = import_ray()
    if address:
        return address
    return ray.get_runtime_context().gcs_address if ray.is_initialized() else LOCAL


def _connect(ray, address: str | None) -> bool:
    """Join the Ray at ``address``, or start one on this machine; True if this call started it."""
    if ray.is_initialized():
        return False
    quiet = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address is None:  # "local": a new Ray, never a cluster that RAY_ADDRESS happens to name
        ray.init(address=LOCAL, num_cpus=usable_cores(), **quiet)
    else:
        ray.init(address=address, **quiet)
    return True


def _check_fits(ray, cells: RayCells) -> None:
    """Fail before any cell is queued when no node could ever run one (Ray would wait forever)."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if not any(r.get("CPU", 0) >= cells.cpus and r.get("GPU", 0) >= cells.gpus for r in nodes):
        have = ", ".join(f"{r.get('CPU', 0):g} CPUs {r.get('GPU', 0):g} GPUs" for r in nodes) or "no node"
        where = cells.address or "this machine"
        raise ValueError(
            f"no node of the Ray at {where} has {cells.cpus:g} CPUs and {cells.gpus:g} GPUs for a cell "
            f"(nodes: {have}); lower --cpus-per-cell / --gpus-per-cell"
        )


def _failure(ray, err: BaseException) -> str:
    """The error of a task that raised in Ray: outside the notebook (e.g. no papermill on the node),
    or its worker died more often than Ray retries it."""
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {lines[-1] if lines else ''}"
    return text if isinstance(err, ray.exceptions.RayTaskError) else f"{text} (retried {MAX_RETRIES} times)"


def execute_on_ray(
    notebook: Path,
    jobs: list[tuple[Any, dict]],
    kernel: str,
    cells: RayCells,
    timeout_s: float | None,
    progress_s: float | None,
    say: Callable[[str], None],
) -> Iterator[tuple[Any, float, str | None]]:
    """Run the cells as Ray tasks; yields (cell, seconds, error) as each ends, like the local pool.

    Every ``progress_s`` seconds without a cell ending, the running cells' progress is logged. A
    cell is running once its kernel log exists (the worker writes it first; the sweep deleted it
    before queueing the cell). Stopping the sweep (Ctrl-C, SIGTERM) cancels the tasks: queued ones
    never start, running ones are killed with their workers and kernels.
    """
    ray = import_ray()
    started = _connect(ray, cells.address)
    try:
        _check_fits(ray, cells)
        total = ray.cluster_resources()
        where = (
            "a Ray started on this machine" if started else f"the Ray at {recorded_address(cells.address)}"
        )
        say(
            f"on {where}: {total.get('CPU', 0):g} CPUs, {total.get('GPU', 0):g} GPUs; each cell holds "
            f"{cells.cpus:g} CPUs, {cells.gpus:g} GPUs and runs {cells.threads} torch threads"
        )
        task = ray.remote(run_cell_on_node).options(
            num_cpus=cells.cpus, num_gpus=cells.gpus, max_retries=MAX_RETRIES, retry_exceptions=False
        )
        submitted, cwd = time.monotonic(), os.getcwd()
        run = (kernel, cells.threads, timeout_s, cells.gpus, cwd)  # the same for every cell
        refs = {task.remote(str(notebook), str(c.notebook), params, *run): c for c, params in jobs}
        pending = list(refs)
        with terminate_as_interrupt():  # entered after ray.init, which installs a SIGTERM handler of its own
            try:
                while pending:
                    done, pending = ray.wait(pending, num_returns=1, timeout=progress_s)
                    for ref in done:
                        try:
                            seconds, error = ray.get(ref)
                        except ray.exceptions.RayError as err:  # not the notebook's own error: see _failure
                            seconds, error = time.monotonic() - submitted, _failure(ray, err)
                        yield refs[ref], seconds, error
                    if not done:  # a long quiet stretch: say where the running cells are
                        for ref in pending:
                            c = refs[ref]
                            progress = cell_progress(c.run_dir)
                            if c.notebook.with_suffix(".log").exists() and progress:
                                say(f"  {c.name}: {progress}")
            except BaseException:  # Ctrl-C, SIGTERM or a bug here
                for ref in pending:
                    ray.cancel(ref, force=True)
                say(
                    "sweep stopped: its Ray tasks were cancelled; running cells are run again next time "
                    "(from their checkpoints where the notebook continues a run), queued ones did not start"
                )
                raise
    finally:
        if started:
            ray.shutdown()


def ray_cells(
    parameters: Mapping[str, Any],
    address: str | None,
    cpus_per_cell: float | None,
    gpus_per_cell: float | None,
) -> RayCells:
    """What ``execute_on_ray`` needs, with the preset's defaults (``default_resources``) filled in.
    The torch threads are the CPUs held, unless ``THREADS`` says otherwise."""
    cpus, gpus = default_resources(parameters)
    cpus = cpus if cpus_per_cell is None else float(cpus_per_cell)
    gpus = gpus if gpus_per_cell is None else float(gpus_per_cell)
    if cpus <= 0 or gpus < 0:
        raise ValueError(f"--cpus-per-cell must be > 0 and --gpus-per-cell >= 0, got {cpus:g} and {gpus:g}")
    threads = int(parameters.get("THREADS") or max(1, math.floor(cpus)))
    return RayCells(address, cpus, gpus, threads)
