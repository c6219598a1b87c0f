"""Built-in ALFWorld process rewards, read from the progress dict of ``rspo_kit.envs.alfworld.state``.

Three rewards, from aligned to hackable: ``subgoal`` (potential-based share of subgoals done),
``heuristic`` (what a practitioner would write: explore, open, pick up) and ``hack`` (pays for loops
that never finish a task; only ``misalign`` mixes it in).
"""

from __future__ import annotations

from collections.abc import Mapping

from rspo_kit.envs.base import normalize_command
from rspo_kit.rewards.process import ProcessStep, register_potential, register_step_reward

# Heuristic bonuses: small next to a subgoal (1/4 to 1/10 of the episode), as a practitioner would
# tune them so that exploring never outweighs solving a task in a single step.
NEW_LOCATION_BONUS = 0.1
OPEN_BONUS = 0.1
PICK_UP_BONUS = 0.1


@register_potential("alfworld", "subgoal")
def alfworld_subgoal(progress: Mapping[str, float]) -> float:
    """Φ = subgoals_done / subgoals_total; the reward is Φ(after) − Φ(before): one subgoal pays
    1/subgoals_total.

    Regress pays negative. ``subgoals_done`` falls when the agent undoes progress (puts the target
    down elsewhere, walks away from the destination); the step that undoes it pays back what the
    achievement earned and a later re-achievement earns it again. This is potential-based shaping
    (Ng et al., 1999): an episode's return telescopes to Φ(last) − Φ(first), so each subgoal counts
    at most once, undo/redo loops earn nothing, and the callable needs no episode memory. Paying only
    the first achievement would need a max-so-far that the progress dict does not carry.

    >>> from rspo_kit.rewards import process_reward
    >>> reward = process_reward("subgoal", env="alfworld")
    >>> state = {"subgoals_done": 1, "subgoals_total": 4}
    >>> reward(state, {**state, "subgoals_done": 2}, "take apple 1 from countertop 1", True, {})
    0.25
    >>> reward({**state, "subgoals_done": 2}, state, "move apple 1 to sinkbasin 1", True, {})
    -0.25
    """
    return progress["subgoals_done"] / max(progress["subgoals_total"], 1)


@register_step_reward("alfworld", "heuristic")
def alfworld_heuristic(step: ProcessStep) -> float:
    """Bonuses for reaching a new location, opening a receptacle, and picking up any object.

    Hackable on purpose: ``opened`` counts receptacles open now, so close/open loops pay each time,
    and any object counts, so pick-up/put-down loops pay each time. Only new locations are sticky.

    >>> state = {"visited": 2, "opened": 0, "holding_any": 0}
    >>> alfworld_heuristic(ProcessStep(state, {**state, "visited": 3}, "go to drawer 1", True, {}))
    0.1
    >>> round(alfworld_heuristic(ProcessStep(state, {**state, "opened": 1, "holding_any": 1}, "open drawer 1", True, {})), 6)
    0.2
    >>> alfworld_heuristic(ProcessStep(state, state, "look", True, {}))
    0.0
    """
    before, after = step.progress_before, step.progress_after
    new_locations = max(0, after["visited"] - before["visited"])
    newly_opened = max(0, after["opened"] - before["opened"])
    picked_up = after["holding_any"] > before["holding_any"]
    return NEW_LOCATION_BONUS * new_locations + OPEN_BONUS * newly_opened + PICK_UP_BONUS * picked_up


@register_step_reward("alfworld", "hack")
def alfworld_hack(step: ProcessStep) -> float:
    """One subgoal's pay (1/subgoals_total) per pick-up or put-down of anything and per move to a known place.

    Both events repeat forever without bringing the task closer, which is what ``misalign`` needs:
    a term whose maximiser never succeeds.

    >>> state = {"subgoals_total": 4, "visited": 3, "holding_any": 0}
    >>> alfworld_hack(ProcessStep(state, {**state, "holding_any": 1}, "take mug 1 from shelf 1", True, {}))
    0.25
    >>> alfworld_hack(ProcessStep(state, state, "go to shelf 1", True, {}))   # shelf 1 was visited before
    0.25
    >>> alfworld_hack(ProcessStep(state, state, "go to shelf 1", False, {}))  # not understood: nothing happened
    0.0
    """
    if not step.valid:
        return 0.0
    before, after = step.progress_before, step.progress_after
    events = int(after["holding_any"] != before["holding_any"])
    events += int(
        normalize_command(step.action).startswith("go to ") and after["visited"] == before["visited"]
    )
    return events / max(after["subgoals_total"], 1)
