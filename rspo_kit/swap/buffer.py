"""The paper's replay buffer D and how D_off is drawn from it (Algorithm 1, lines 11 and 15).

Each entry is one of B's collection trajectories (or, for RSPO_H, one of A's own) as the paper's
Figure 2 stores it: the trajectory with its behaviour log-probs (in its steps), its outcome R and its
off-policy advantage A_off per step (None where X computes it at update time: PPO's GAE from A's
critic). ``draw`` picks α·B·N of them for one update of A:

- ``reward``: highest outcome first (the paper's choice; its Table 2: 70.6 % WebShop success against
  variance-based 63.0 % and random 12.8 %);
- ``variance``: highest outcome variance of the entry's collection group first;
- ``random``: uniformly.

Per ``trajectory`` (entries ranked one by one) or per ``group`` (whole collection groups ranked by
their mean outcome, their variance or at random, taken until the draw is full). Among equal scores the
``tie_order`` decides: ``advantage`` (larger mean stored advantage first: a success of a group where B
mostly failed carries the signal, one of an all-success group has A_off = 0) or ``random``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

Sampling = Literal["reward", "variance", "random"]
SAMPLINGS: tuple[str, ...] = get_args(Sampling)
DrawUnit = Literal["trajectory", "group"]
TieOrder = Literal["advantage", "random"]


@dataclass
class ReplayEntry:
    """One stored trajectory: (τ, R, A_off) of the paper's Figure 2."""

    traj: Any  # a rollout Trajectory: its steps carry the behaviour log-probs
    outcome: float  # R, the outcome reward it was relabelled with
    advantages: list[float] | None  # A_off per step; None: X computes it at update time (PPO)
    group: str  # its collection group (task id + rollout)

    @property
    def advantage(self) -> float:
        """The mean stored advantage over its steps (0 where none is stored): the tie order's key."""
        return sum(self.advantages) / len(self.advantages) if self.advantages else 0.0


def _variance(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


class LoopBuffer:
    """D: entries in the order they entered; ``capacity`` bounds a buffer kept across loops (``fifo``)."""

    def __init__(self, capacity: int | None = None):
        if capacity is not None and capacity < 1:
            raise ValueError(f"buffer capacity must be None or >= 1, got {capacity}")
        self.capacity = capacity
        self.entries: list[ReplayEntry] = []

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entries: Iterable[ReplayEntry]) -> int:
        """Store entries (crashed or empty trajectories never enter), oldest evicted beyond capacity;
        returns how many entered."""
        kept = [e for e in entries if e.traj.steps and not e.traj.crashed]
        self.entries += kept
        if self.capacity is not None and len(self.entries) > self.capacity:
            del self.entries[: len(self.entries) - self.capacity]
        return len(kept)

    def clear(self) -> None:
        """D <- ∅ (Algorithm 1, line 19)."""
        self.entries.clear()

    def success_share(self) -> float:
        """The share of stored trajectories that won (NaN when empty)."""
        return sum(e.traj.won for e in self.entries) / len(self.entries) if self.entries else float("nan")


def _scores(entries: Sequence[ReplayEntry], sampling: Sampling, rng: random.Random) -> list[float]:
    """Each entry's draw score (higher first) under ``sampling``."""
    if sampling == "reward":
        return [e.outcome for e in entries]
    if sampling == "variance":
        groups: dict[str, list[float]] = {}
        for e in entries:
            groups.setdefault(e.group, []).append(e.outcome)
        variance = {g: _variance(v) for g, v in groups.items()}
        return [variance[e.group] for e in entries]
    return [rng.random() for _ in entries]


def draw(
    entries: Sequence[ReplayEntry],
    n: int,
    sampling: Sampling,
    rng: random.Random,
    unit: DrawUnit = "trajectory",
    tie_order: TieOrder = "advantage",
) -> list[int]:
    """The indices of ``n`` entries to replay (fewer if ``entries`` holds fewer), best first.

    >>> from types import SimpleNamespace as NS
    >>> def entry(won, group, adv):
    ...     return ReplayEntry(NS(won=won), float(won), [adv], group)
    >>> d = [entry(0, "a", -1.0), entry(1, "a", 1.0), entry(1, "b", 0.0), entry(1, "b", 0.0)]
    >>> draw(d, 1, "reward", random.Random(0))  # a success, the one of a group where B also failed
    [1]
    >>> draw(d, 2, "variance", random.Random(0), unit="group")  # group a varies, b does not
    [1, 0]
    """
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    if n <= 0 or not entries:
        return []
    score = _scores(entries, sampling, rng)
    noise = [rng.random() for _ in entries]  # the random tie order, and the last key of the other
    tie = [e.advantage if tie_order == "advantage" else 0.0 for e in entries]
    if unit == "trajectory":
        order = sorted(range(len(entries)), key=lambda i: (-score[i], -tie[i], noise[i]))
        return order[:n]
    members: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        members.setdefault(e.group, []).append(i)

    def group_key(g: str) -> tuple[float, float, float]:
        idx = members[g]
        mean = sum(score[i] for i in idx) / len(idx)
        return (-mean, -sum(tie[i] for i in idx) / len(idx), noise[idx[0]])

    picked: list[int] = []
    for g in sorted(members, key=group_key):
        picked += sorted(members[g], key=lambda i: (-entries[i].outcome, -tie[i], noise[i]))
        if len(picked) >= n:
            break
    return picked[:n]
