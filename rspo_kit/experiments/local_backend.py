"""Sweep cells in a pool of processes on this machine, at most one per CPU core: the default backend.

The workers are spawned, never forked from a caller whose torch thread pools have run, and die with
the sweep's process, even a killed one, taking their papermill kernels along. Stopping the sweep
(Ctrl-C, SIGTERM) cancels the queued cells and terminates the running ones. ``ray_backend`` runs the
same cells as Ray tasks instead.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path

from rspo_kit.experiments.cells import cell_progress, run_cell, terminate_as_interrupt
from rspo_kit.experiments.grid import Cell


def execute_locally(
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
    with terminate_as_interrupt():
        others = set(multiprocessing.active_children())  # the caller's own children: not ours to stop
        pool = ProcessPoolExecutor(n_workers, mp_context=get_context("spawn"), initializer=_worker_init)
        try:
            futures = {
                pool.submit(run_cell, str(notebook), str(c.notebook), params, kernel, threads, timeout_s): c
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
        except BaseException:  # Ctrl-C, SIGTERM (see terminate_as_interrupt) or a bug here
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
