"""The chain testbed: a small partially observable text world built to give RSPO's mechanisms room.

Success needs the right door in each of ``length`` rooms in a row, and a wrong door sends the agent
back to room 1, so the chance of sampling a success falls fast with the length (the difficulty knob,
with the number of doors and the step cap). A lever pays nothing in the outcome and can be pulled
forever: the hackable event that ``rewards.chain``'s ``hack`` term pays for. Levels are envs of their
own, named by what they are: ``chain-4x2`` (4 rooms of 2 doors), ``chain-6x3``, ``chain-8x4``; any
``chain-<length>x<doors>`` name resolves on first use, and ``register_chain`` adds others (a step cap).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from rspo_kit.envs.chain.env import ChainEnv
from rspo_kit.envs.chain.levels import (
    COLOURS,
    HELD_OUT_PAIRS,
    SPLIT_SIZES,
    ChainLevel,
    chain_tasks,
    parse_level,
    room_sets,
)
from rspo_kit.envs.registry import register_env

BUILTIN_LEVELS = ("chain-4x2", "chain-6x3", "chain-8x4")
LEVELS: dict[str, ChainLevel] = {}  # every registered level by env name
# Called with each level's name once it is registered: how ``rspo_kit.rewards.chain`` registers the
# process rewards of levels made after it was imported, without this package importing the rewards.
ON_REGISTER: list[Callable[[str], None]] = []


def register_chain(length: int, doors: int, max_steps: int | None = None) -> str:
    """Register the level with these knobs as an env (if it is not yet) and return its name.

    >>> register_chain(5, 3)
    'chain-5x3'
    >>> register_chain(5, 3, max_steps=40)
    'chain-5x3-cap40'
    """
    level = ChainLevel(length, doors, max_steps)
    if level.name not in LEVELS:
        register_env(
            level.name, make=partial(ChainEnv, level), list_tasks=partial(chain_tasks, level), overwrite=True
        )
        LEVELS[level.name] = level
        for hook in ON_REGISTER:
            hook(level.name)
    return level.name


def resolve_env(name: str) -> bool:
    """Register ``chain-<length>x<doors>`` (``-cap<max_steps>``) on first use (the registry asks here); False for other names."""
    level = parse_level(name)
    if level is None:
        return False
    register_chain(level.length, level.doors, level.max_steps)
    return True


for _name in BUILTIN_LEVELS:
    resolve_env(_name)

__all__ = [
    "BUILTIN_LEVELS",
    "COLOURS",
    "HELD_OUT_PAIRS",
    "LEVELS",
    "ON_REGISTER",
    "SPLIT_SIZES",
    "ChainEnv",
    "ChainLevel",
    "chain_tasks",
    "parse_level",
    "register_chain",
    "resolve_env",
    "room_sets",
]
