"""The TextEnv protocol: what every environment gives the rest of rspo_kit.

An environment turns any string into a step: model output is untrusted text, so ``step`` never raises
on it. Unknown or malformed actions leave the state unchanged and come back with ``valid=False``.
``info["progress"]`` is the env's own subgoal state (what process rewards read) and
``info["anchor"]`` a history-free key of the state (equal states, equal anchors: GiGPO's step groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Task:
    """One task of one environment. ``meta`` carries what the env needs to build it (e.g. a scene spec)."""

    env: str
    id: str
    split: str
    kind: str = ""  # task family for per-type tables, e.g. "pick_and_place_simple"
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Observation:
    text: str
    admissible: tuple[str, ...]
    instruction: str


@dataclass(frozen=True)
class StepResult:
    obs: Observation
    done: bool
    won: bool
    score: float  # outcome: 1.0 on success in ALFWorld, 100 * reward in WebShop
    valid: bool  # the action was understood and applied
    info: dict[str, Any]


@runtime_checkable
class TextEnv(Protocol):
    """What ``make_env`` returns. Any object with these methods plugs into rspo_kit."""

    def reset(self, task: Task) -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def admissible_actions(self) -> list[str]: ...

    def expert_action(self) -> str | None: ...


class EpisodeOverError(RuntimeError):
    """``step`` was called after the episode ended: a caller bug, not model output."""


def normalize_command(action: str) -> str:
    """Lower-case and collapse all whitespace, so ``'  Go  to\\tFridge 1 '`` reads ``'go to fridge 1'``.

    >>> normalize_command("  Go  to\\tFridge 1 ")
    'go to fridge 1'
    """
    return " ".join(str(action).lower().split())
