"""Levels of the chain testbed and their task splits, generated from seeds (no manifest files).

A level is a chain of ``length`` rooms with ``doors`` coloured doors each. A task fixes, per room, which
colours its doors have (``doors`` of the eight ``COLOURS``) and which one leads on (the windy door).

Splits (``SPLIT_SIZES``): ``train`` and ``eval`` draw every room's colours from the *seen* colour sets;
``eval_unseen`` gives every room at least one of the ``HELD_OUT_PAIRS`` — two colours that train never
shows behind doors of one room — and puts the windy door on a colour of such a pair. A policy that
reads the clue and copies its colour solves these rooms as it solves any other; one that learnt which
colours tend to win together does not. Train and eval hold no task in common.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from itertools import combinations

from rspo_kit.envs.base import Task

COLOURS = ("red", "blue", "green", "yellow", "white", "black", "brown", "purple")
# A perfect matching of the colours: a room avoids all four pairs by taking at most one colour of each,
# so every level with up to four doors has seen rooms (2^doors * C(4, doors) colour sets) and unseen ones.
HELD_OUT_PAIRS = (("red", "green"), ("blue", "yellow"), ("white", "black"), ("brown", "purple"))
MAX_DOORS = len(HELD_OUT_PAIRS)
SPLIT_SIZES = {"train": 3000, "eval": 120, "eval_unseen": 120}
NAME = re.compile(r"^chain-(\d+)x(\d+)(?:-cap(\d+))?$")


@dataclass(frozen=True)
class ChainLevel:
    """Difficulty knobs: ``length`` rooms of ``doors`` doors; episodes end after ``max_steps`` steps."""

    length: int
    doors: int
    max_steps: int | None = None  # None: 3 * length (the expert needs 2 * length)

    def __post_init__(self) -> None:
        if self.length < 1:
            raise ValueError(f"ChainLevel.length = {self.length}: must be >= 1")
        if not 2 <= self.doors <= MAX_DOORS:
            raise ValueError(f"ChainLevel.doors = {self.doors}: must be in [2, {MAX_DOORS}]")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"ChainLevel.max_steps = {self.max_steps}: must be None or >= 1")

    @property
    def name(self) -> str:
        """``chain-<length>x<doors>``, plus ``-cap<max_steps>`` where the cap is not the default."""
        cap = f"-cap{self.max_steps}" if self.max_steps is not None else ""
        return f"chain-{self.length}x{self.doors}{cap}"

    @property
    def step_cap(self) -> int:
        return self.max_steps if self.max_steps is not None else 3 * self.length


def parse_level(name: str) -> ChainLevel | None:
    """The level a name such as ``"chain-6x3"`` stands for, or None.

    >>> parse_level("chain-6x3")
    ChainLevel(length=6, doors=3, max_steps=None)
    >>> parse_level("chain-4x2-cap8")
    ChainLevel(length=4, doors=2, max_steps=8)
    >>> parse_level("alfworld") is None
    True
    """
    m = NAME.match(name)
    if m is None:
        return None
    return ChainLevel(int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None)


def _held_out(colours: tuple[str, ...]) -> bool:
    """Whether a room's colours include both colours of a held-out pair."""
    return any(a in colours and b in colours for a, b in HELD_OUT_PAIRS)


@cache
def room_sets(doors: int) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """(seen, unseen) colour sets of ``doors`` colours, each set in ``COLOURS`` order."""
    sets = list(combinations(COLOURS, doors))
    return tuple(s for s in sets if not _held_out(s)), tuple(s for s in sets if _held_out(s))


def _room(rng: random.Random, doors: int, unseen: bool) -> tuple[list[str], str]:
    """One room: its door colours in shown order, and the windy one."""
    seen_sets, unseen_sets = room_sets(doors)
    colours = list(rng.choice(unseen_sets if unseen else seen_sets))
    rng.shuffle(colours)
    if unseen:  # the way on is a colour of a held-out pair: the decision train never shows
        pairs = [c for a, b in HELD_OUT_PAIRS if a in colours and b in colours for c in (a, b)]
        return colours, rng.choice(pairs)
    return colours, rng.choice(colours)


def _task(level: ChainLevel, split: str, index: int) -> Task:
    rng = random.Random(f"rspo_kit-chain-{level.length}x{level.doors}-{split}-{index}")
    rooms = [_room(rng, level.doors, split == "eval_unseen") for _ in range(level.length)]
    meta = {"doors": tuple(tuple(c) for c, _ in rooms), "windy": tuple(w for _, w in rooms)}
    return Task(level.name, f"{level.name}/{split}/{index:04d}", split, kind=level.name, meta=meta)


def _content(task: Task) -> tuple:
    return task.meta["doors"], task.meta["windy"]


@cache
def _tasks(level: ChainLevel, split: str) -> tuple[Task, ...]:
    if split != "train":
        return tuple(_task(level, split, i) for i in range(SPLIT_SIZES[split]))
    # train skips any draw that equals an eval task; small levels may repeat tasks within train
    taken = {_content(t) for t in _tasks(level, "eval")}
    out, index = [], 0
    while len(out) < SPLIT_SIZES["train"]:
        if index > 100 * SPLIT_SIZES["train"]:
            raise ValueError(f"level {level.name} has too few distinct tasks for train apart from eval")
        task = _task(level, "train", index)
        if _content(task) not in taken:
            out.append(Task(task.env, f"{level.name}/train/{len(out):04d}", "train", task.kind, task.meta))
        index += 1
    return tuple(out)


def chain_tasks(level: ChainLevel, split: str) -> list[Task]:
    """A split's tasks of ``level``, always the same ones in the same order."""
    if split not in SPLIT_SIZES:
        raise ValueError(f"chain split must be one of {tuple(SPLIT_SIZES)}, got {split!r}")
    return list(_tasks(level, split))
