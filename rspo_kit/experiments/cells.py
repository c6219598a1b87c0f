"""One sweep cell in one process: papermill runs its notebook headless; and where a running cell stands.

``run_cell`` executes a cell's notebook on this virtualenv's kernel (``ensure_kernel``), the kernel's
own stdout and stderr in ``<cell>.log`` beside the output notebook; a notebook that fails is an error
returned, not raised, so that the other cells go on. ``cell_progress`` reads how far a cell's run got
from its ``metrics.jsonl``. Both backends run cells with these: the local process pool
(``local_backend``) and Ray tasks (``ray_backend``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rspo_kit.records.metrics import METRICS_FILE
from rspo_kit.records.notebook import NoResults, read_results

KERNEL_NAME = "rspo-kit"  # registered from this virtualenv by ensure_kernel() / `make kernel`

# Headless kernels: library progress bars (transformers, tqdm) would be stored as widget outputs.
HEADLESS_ENV = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


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


@dataclass
class CellOutcome:
    """What became of one cell of a sweep: its status, seconds and error."""

    name: str
    status: str  # "finished" (ran now), "skipped" (finished before), "failed", "pending" (not run here)
    seconds: float = 0.0
    error: str | None = None


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


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


def run_cell(
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


@contextlib.contextmanager
def terminate_as_interrupt():
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
