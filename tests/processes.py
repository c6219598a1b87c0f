"""Processes of a test: code run in a fresh interpreter (what a test of imports needs), and the processes
below a test's process, read from Linux /proc (what a test that kills or cancels work checks)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path


def fresh_python(code: str, timeout: float = 120) -> str:
    """The standard output of ``code`` run by a fresh interpreter, where nothing is imported yet; it must
    exit 0 (its standard error is the failure's message otherwise)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (Linux /proc)."""
    found, todo = set(), [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = [int(k) for k in (task / "children").read_text().split()]
                found.update(kids)
                todo.extend(kids)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return False
