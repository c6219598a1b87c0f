"""Built-in ALFWorld process rewards, read from the progress dict of ``rspo_kit.envs.alfworld.state``.

Three rewards, from aligned to hackable: ``subgoal`` (potential-based share of subgoals done),
``heuristic`` (what a practitioner would write: explore, open, pick up) and ``hack`` (pays for loops
that never finish a task; only ``misalign`` mixes it in).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rspo_kit.envs.base import normalize_command
from rspo_kit.rewards.process import register_process_reward

# Heuristic bonuses: small next to a subgoal (1/4 to 1/10 of the episode), as a practitioner would
# tune them so that exploring never outweighs solving a task in a single step.
NEW_LOCATION_BONUS = 0.1
OPEN_BONUS = 0.1
PICK_UP_BONUS = 0.1


def _share_done(progress: Mapping[str, float]) -> float:
    return progress["subgoals_done"] / max(progress["subgoals_total"], 1)


@register_process_reward("alfworld", "subgoal")
def alfworld_subgoal(
    progress_before: Mapping[str, float],
    progress_after: Mapping[str, float],
    action: str,
    valid: bool,
    info: Mapping[str, Any],
) -> float:
    """Φ(after) − Φ(before) with Φ = subgoals_done / subgoals_total: one subgoal pays 1/subgoals_total.

    Regress pays negative. ``subgoals_done`` falls when the agent undoes progress (puts the target
    down elsewhere, walks away from the destination); the step that undoes it pays back what the
    achievement earned and a later re-achievement earns it again. This is potential-based shaping
    (Ng et al., 1999): an episode's return telescopes to Φ(last) − Φ(first), so each subgoal counts
    at most once, undo/redo loops earn nothing, and the callable needs no episode memory. Paying only
    the first achievement would need a max-so-far that the progress dict does not carry.

    >>> state = {"subgoals_done": 1, "subgoals_total": 4}
    >>> alfworld_subgoal(state, {**state, "subgoals_done": 2}, "take apple 1 from countertop 1", True, {})
    0.25
    >>> alfworld_subgoal({**state, "subgoals_done": 2}, state, "move apple 1 to sinkbasin 1", True, {})
    -0.25
    """
    return _share_done(progress_after) - _share_done(progress_before)


@register_process_reward("alfworld", "heuristic")
def alfworld_heuristic(
    progress_before: Mapping[str, float],
    progress_after: Mapping[str, float],
    action: str,
    valid: bool,
    info: Mapping[str, Any],
) -> float:
    """Bonuses for reaching a new location, opening a receptacle, and picking up any object.

    Hackable on purpose: ``opened`` counts receptacles open now, so close/open loops pay each time,
    and any object counts, so pick-up/put-down loops pay each time. Only new locations are sticky.

    >>> state = {"visited": 2, "opened": 0, "holding_any": 0}
    >>> alfworld_heuristic(state, {**state, "visited": 3}, "go to drawer 1", True, {})
    0.1
    >>> round(alfworld_heuristic(state, {**state, "opened": 1, "holding_any": 1}, "open drawer 1", True, {}), 6)
    0.2
    >>> alfworld_heuristic(state, state, "look", True, {})
    0.0
    """
    new_locations = max(0, progress_after["visited"] - progress_before["visited"])
    newly_opened = max(0, progress_after["opened"] - progress_before["opened"])
    picked_up = progress_after["holding_any"] > progress_before["holding_any"]
    return NEW_LOCATION_BONUS * new_locations + OPEN_BONUS * newly_opened + PICK_UP_BONUS * picked_up


@register_process_reward("alfworld", "hack")
def alfworld_hack(
    progress_before: Mapping[str, float],
    progress_after: Mapping[str, float],
    action: str,
    valid: bool,
    info: Mapping[str, Any],
) -> float:
    """One subgoal's pay (1/subgoals_total) per pick-up or put-down of anything and per move to a known place.

    Both events repeat forever without bringing the task closer, which is what ``misalign`` needs:
    a term whose maximiser never succeeds.

    >>> state = {"subgoals_total": 4, "visited": 3, "holding_any": 0}
    >>> alfworld_hack(state, {**state, "holding_any": 1}, "take mug 1 from shelf 1", True, {})
    0.25
    >>> alfworld_hack(state, state, "go to shelf 1", True, {})   # shelf 1 was visited before
    0.25
    >>> alfworld_hack(state, state, "go to shelf 1", False, {})  # not understood: nothing happened
    0.0
    """
    if not valid:
        return 0.0
    events = int(progress_after["holding_any"] != progress_before["holding_any"])
    revisit = normalize_command(action).startswith("go to ") and (
        progress_after["visited"] == progress_before["visited"]
    )
    events += int(revisit)
    return events / max(progress_after["subgoals_total"], 1)
