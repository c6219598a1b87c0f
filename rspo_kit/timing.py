"""Wall-clock seconds into a metrics row: ``with timer(row, "perf/rollout_s"): ...``.

The trainer times each phase of an iteration this way, so that the algorithm's lines carry no clocks.
A phase that raises records nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager


@contextmanager
def timer(row: MutableMapping[str, float], key: str) -> Iterator[None]:
    """Set ``row[key]`` to the seconds the ``with`` block took.

    >>> row = {}
    >>> with timer(row, "perf/nothing_s"):
    ...     pass
    >>> 0 <= row["perf/nothing_s"] < 1
    True
    """
    start = time.perf_counter()
    yield
    row[key] = time.perf_counter() - start
