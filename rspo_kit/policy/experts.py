"""Partially observable search experts: the teachers of the SFT warm start.

The planner behind ``env.expert_action()`` is omniscient (it knows what hides in closed drawers), so a
model that sees only its prompt cannot imitate it. These experts act from the prompt's own view of
the episode — the instruction, the memory, the current observation and the admissible actions — the
way a person searches: visit receptacles in room order, open closed ones, remember what was seen,
then carry out the task. For WebShop, the env's own expert already acts from what it sees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rspo_kit.policy.prompts import AlfworldMemory, EpisodeContext
from rspo_kit.policy.prompts import object_kind as _kind

_TASK_PATTERNS = (
    (r"^look at (\w+) under the (\w+)", "look_at_obj_in_light"),
    (r"^examine the (\w+) with the (\w+)", "look_at_obj_in_light"),
    (r"^put a clean (\w+) in (\w+)", "pick_clean_then_place_in_recep"),
    (r"^clean some (\w+) and put it in (\w+)", "pick_clean_then_place_in_recep"),
    (r"^put a hot (\w+) in (\w+)", "pick_heat_then_place_in_recep"),
    (r"^heat some (\w+) and put it in (\w+)", "pick_heat_then_place_in_recep"),
    (r"^put a cool (\w+) in (\w+)", "pick_cool_then_place_in_recep"),
    (r"^cool some (\w+) and put it in (\w+)", "pick_cool_then_place_in_recep"),
    (r"^put two (\w+) in (\w+)", "pick_two_obj_and_place"),
    (r"^find two (\w+) and put them in (\w+)", "pick_two_obj_and_place"),
    (r"^put a (\w+) in (\w+)", "pick_and_place_simple"),
    (r"^put some (\w+) on (\w+)", "pick_and_place_simple"),
)
_APPLIANCE = {
    "pick_clean_then_place_in_recep": ("clean", "sinkbasin"),
    "pick_heat_then_place_in_recep": ("heat", "microwave"),
    "pick_cool_then_place_in_recep": ("cool", "fridge"),
}


@dataclass(frozen=True)
class ParsedTask:
    task_type: str
    obj: str
    target: str  # destination receptacle type, or the lamp type for look_at_obj_in_light


def parse_alfworld_instruction(instruction: str) -> ParsedTask | None:
    """The task of an ALFWorld instruction, read from its template (None if no template fits).

    >>> parse_alfworld_instruction("heat some egg and put it in countertop.")
    ParsedTask(task_type='pick_heat_then_place_in_recep', obj='egg', target='countertop')
    """
    text = instruction.strip().rstrip(".").lower()
    for pattern, task_type in _TASK_PATTERNS:
        if m := re.match(pattern, text):
            return ParsedTask(task_type, m.group(1), m.group(2))
    return None


def alfworld_search_action(ctx: EpisodeContext) -> str:
    """The next action of the search expert, from the prompt's view of the episode only."""
    task = parse_alfworld_instruction(ctx.instruction)
    mem: AlfworldMemory = ctx.memory
    admissible = set(ctx.admissible)
    if task is None or not mem.order:
        return "look"
    feedback = [o for _, o in ctx.history]
    holding = mem.holding if _kind(mem.holding) == task.obj else ""
    in_dest = {
        o
        for r, c in mem.contents.items()
        if _kind(r) == task.target and task.task_type != "look_at_obj_in_light"
        for o in c.split(", ")
    }

    def go(receptacle: str) -> str:
        return f"go to {receptacle}" if mem.at != receptacle else ""

    def search() -> str:
        """Open the closed receptacle we stand at, else go to the next one not yet looked into."""
        if mem.contents.get(mem.at) == "closed" and f"open {mem.at}" in admissible:
            return f"open {mem.at}"
        for r in mem.order:
            if mem.contents.get(r, "?") in ("?", "closed") and r != mem.at:
                return f"go to {r}"
        return "look"

    if not holding:
        if mem.holding:  # holding something useless (after a detour): put it back where we are
            return (
                f"move {mem.holding} to {mem.at}"
                if f"move {mem.holding} to {mem.at}" in admissible
                else search()
            )
        for r in mem.order:
            for o in mem.contents.get(r, "").split(", "):
                if _kind(o) == task.obj and o not in in_dest:
                    return go(r) or f"take {o} from {r}"
        return search()

    if task.task_type == "look_at_obj_in_light":
        for r in mem.order:
            for o in mem.contents.get(r, "").split(", "):
                if _kind(o) == task.target:
                    return go(r) or f"use {o}"
        return search()
    if task.task_type in _APPLIANCE:
        verb, appliance = _APPLIANCE[task.task_type]
        done = any(f.startswith(f"You {verb} the {holding} using") for f in feedback)
        if not done:
            place = next((r for r in mem.order if _kind(r) == appliance), "")
            return go(place) or f"{verb} {holding} with {place}"
    for r in mem.order:
        if _kind(r) == task.target:
            if mem.at != r:
                return f"go to {r}"
            if mem.contents.get(r) == "closed":
                return f"open {r}"
            return f"move {holding} to {r}"
    return search()
