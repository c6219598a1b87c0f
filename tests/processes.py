"""Processes below a test's process, read from Linux /proc: what a test that kills or cancels work checks."""

from __future__ import annotations

import contextlib
from pathlib import Path


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
