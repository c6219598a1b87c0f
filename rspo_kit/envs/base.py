"""The TextEnv protocol: what every environment gives the rest of rspo_kit.

An environment turns any string into a step: model output is untrusted text, so ``step`` never raises
on it. Unknown or malformed actions leave the state unchanged and come back with ``valid=False``.
``info["progress"]`` is the env's own subgoal state (what process rewards read: a dict of numbers) and
``info["anchor"]`` a history-free, hashable key of the state (equal states, equal anchors: GiGPO's
step groups). Every ``StepResult.info`` carries both for the state after the step; the state right
after ``reset`` comes from the env's optional ``info`` attribute (``state_info``). An env without one,
or a result without a key, gets the defaults: no progress, and the observation's text as the anchor.
``rspo_kit.envs.check_env`` checks all of this on a given env.
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
    """What ``make_env`` returns. Any object with these methods plugs into rspo_kit.

    Optional: an ``info`` attribute (a property, typically) holding ``{"progress": ..., "anchor": ...}``
    of the current state, read right after ``reset``; the first step's anchor and progress-before come
    from it. Give one when ``step`` reports progress or an anchor: without it the first step has
    empty progress and the observation's text as its anchor (``state_info``), which then differs from
    the anchor ``step`` gives the same state later. Not a protocol member, so that an env without it
    still passes ``isinstance(env, TextEnv)``.
    """

    def reset(self, task: Task) -> Observation:
        """Start ``task``; the first observation (text, admissible actions, the task's instruction)."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply any text; never raises on it (an action not understood: ``valid=False``)."""
        ...

    def admissible_actions(self) -> list[str]:
        """The actions that are valid now (non-empty strings); what ``Observation.admissible`` lists."""
        ...

    def expert_action(self) -> str | None:
        """A demonstrator's next action, which wins the task within the env's step cap; None after
        the episode ended."""
        ...


def state_info(info: Mapping[str, Any] | None, obs: Observation) -> dict[str, Any]:
    """``info`` with the protocol's two keys, defaulting those it lacks: ``progress`` to ``{}`` and
    ``anchor`` to the observation's text (a state's own text is history-free in most text envs).

    >>> state_info({"progress": {"digits": 1}}, Observation("Click.", (), ""))
    {'progress': {'digits': 1}, 'anchor': 'Click.'}
    """
    out = dict(info) if isinstance(info, Mapping) else {}
    out.setdefault("progress", {})
    out.setdefault("anchor", obs.text)
    return out


def reset_info(env: TextEnv, obs: Observation) -> dict[str, Any]:
    """Progress and anchor of the state ``reset`` returned ``obs`` for: the env's ``info`` attribute
    where it has one, with ``state_info``'s defaults."""
    return state_info(getattr(env, "info", None), obs)


class EpisodeOverError(RuntimeError):
    """``step`` was called after the episode ended: a caller bug, not model output."""


def normalize_command(action: str) -> str:
    """Lower-case and collapse all whitespace, so ``'  Go  to\\tFridge 1 '`` reads ``'go to fridge 1'``.

    >>> normalize_command("  Go  to\\tFridge 1 ")
    'go to fridge 1'
    """
    return " ".join(str(action).lower().split())
