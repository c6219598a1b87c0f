"""ALFWorld world state, subgoal progress and GiGPO anchors, as pure functions.

Both engines (the real textworld one, and later a native one) describe their state as a ``WorldState``
of demangled names (``apple 1``, ``sinkbasin 1``, ``loc 4``); everything that process rewards and
GiGPO read is computed from it here, so the engines agree by construction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class WorldState:
    at: str  # the agent's location
    held: frozenset[str]
    opened: frozenset[str]
    openable: frozenset[str]
    in_receptacle: Mapping[str, str]  # object -> receptacle
    receptacle_at: Mapping[str, str]  # receptacle -> location
    otype: Mapping[str, str]  # object -> type, lower-case without "type" ("apple")
    rtype: Mapping[str, str]  # receptacle -> type ("countertop")
    hot: frozenset[str] = frozenset()
    clean: frozenset[str] = frozenset()
    cool: frozenset[str] = frozenset()
    toggled: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GoalInfo:
    """What the task asks, in lower-case type names (from traj_data's ``pddl_params``)."""

    task_type: str
    object_type: str
    dest_type: str = ""
    toggle_type: str = ""

    @classmethod
    def from_traj_data(cls, traj: Mapping) -> GoalInfo:
        p = traj["pddl_params"]
        return cls(
            traj["task_type"],
            str(p.get("object_target", "")).lower(),
            str(p.get("parent_target", "")).lower(),
            str(p.get("toggle_target", "")).lower(),
        )


_TRANSFORM_SET = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "hot",
    "pick_cool_then_place_in_recep": "cool",
}


def _type_name(name: str) -> str:
    name = name.strip()
    return name[: -len("type")] if name.endswith("type") else name


# the object conditions a WorldState tracks, each the set of objects in it (the engine's is<name> facts)
OBJECT_CONDITIONS = ("hot", "clean", "cool", "toggled")


def world_from_facts(facts: Iterable) -> WorldState:
    """Build a WorldState from textworld Propositions with demangled argument names."""
    at = ""
    held, opened, openable = set(), set(), set()
    in_rec, rec_at, otype, rtype = {}, {}, {}, {}
    flags: dict[str, set[str]] = {f"is{condition}": set() for condition in OBJECT_CONDITIONS}
    for fact in facts:
        args = [v.name.strip() for v in fact.arguments]
        name = fact.name
        if name == "atlocation":
            at = args[1]
        elif name == "holds":
            held.add(args[1])
        elif name == "opened":
            opened.add(args[0])
        elif name == "openable":
            openable.add(args[0])
        elif name == "inreceptacle":
            in_rec[args[0]] = args[1]
        elif name == "receptacleatlocation":
            rec_at[args[0]] = args[1]
        elif name == "objecttype":
            otype[args[0]] = _type_name(args[1])
        elif name == "receptacletype":
            rtype[args[0]] = _type_name(args[1])
        elif name in flags:
            flags[name].add(args[0])
    return WorldState(
        at=at,
        held=frozenset(held),
        opened=frozenset(opened),
        openable=frozenset(openable),
        in_receptacle=in_rec,
        receptacle_at=rec_at,
        otype=otype,
        rtype=rtype,
        **{condition: frozenset(flags[f"is{condition}"]) for condition in OBJECT_CONDITIONS},
    )


def visible_objects(w: WorldState) -> set[str]:
    """Objects the agent can see right now: in an open (or non-openable) receptacle here, or held."""
    here = {r for r, loc in w.receptacle_at.items() if loc == w.at and (r not in w.openable or r in w.opened)}
    return {o for o, r in w.in_receptacle.items() if r in here} | set(w.held)


def anchor(w: WorldState) -> str:
    """History-free key of the state: location, inventory, open receptacles, placements, object states."""
    key = repr(
        (
            w.at,
            sorted(w.held),
            sorted(w.opened),
            sorted(w.in_receptacle.items()),
            sorted(w.hot),
            sorted(w.clean),
            sorted(w.cool),
            sorted(w.toggled),
        )
    )
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def subgoal_names(task_type: str) -> tuple[str, ...]:
    if task_type == "look_at_obj_in_light":
        return ("seen", "held", "transformed", "at_destination")  # transformed = lamp on
    if task_type in _TRANSFORM_SET:
        return ("seen", "held", "transformed", "at_destination", "placed")
    return ("seen", "held", "at_destination", "placed")


def targets_needed(task_type: str) -> int:
    return 2 if task_type == "pick_two_obj_and_place" else 1


def progress(
    w: WorldState, goal: GoalInfo, seen: Iterable[str] = (), visited: Iterable[str] = ()
) -> dict[str, int]:
    """Subgoal state of the task (what process rewards read).

    Each target object has a *stage*: how far along the task's subgoal chain it is (seen, held,
    transformed, at the destination while held, placed). ``subgoals_done`` sums the best stages over
    the number of objects the task needs (two for pick_two_obj_and_place); ``seen`` is sticky through
    ``seen``, the set of objects observed earlier in the episode.

    Three task-agnostic counters serve heuristic shaping: ``visited`` (distinct receptacle locations
    reached so far, sticky through ``visited``), ``opened`` (receptacles open now) and
    ``holding_any`` (the agent holds some object, target or not).
    """
    names = subgoal_names(goal.task_type)
    need = targets_needed(goal.task_type)
    seen = set(seen) | visible_objects(w)
    targets = sorted(o for o, t in w.otype.items() if t == goal.object_type)
    state_set = getattr(w, _TRANSFORM_SET[goal.task_type]) if goal.task_type in _TRANSFORM_SET else None
    dest_locs = {w.receptacle_at.get(r) for r, t in w.rtype.items() if t == goal.dest_type}
    lamps = [o for o, t in w.otype.items() if goal.toggle_type and t == goal.toggle_type]
    lamp_on = any(lamp in w.toggled for lamp in lamps)
    lit_locs = {w.receptacle_at.get(w.in_receptacle.get(lamp, ""), "") for lamp in lamps if lamp in w.toggled}

    def stage(o: str) -> int:
        held = o in w.held
        rec = w.in_receptacle.get(o)
        if goal.task_type == "look_at_obj_in_light":
            if held and lamp_on:
                return 4 if w.at in lit_locs else 3
            return 2 if held else int(o in seen)
        transformed = state_set is None or o in state_set
        if rec is not None and w.rtype.get(rec) == goal.dest_type and transformed:
            return len(names)
        if held and transformed and w.at in dest_locs:
            return len(names) - 1
        if state_set is not None and transformed:
            return 3
        return 2 if held else int(o in seen)

    stages = sorted((stage(o) for o in targets), reverse=True)[:need]
    best = stages + [0] * (need - len(stages))
    holding = [o for o in targets if o in w.held]
    lamp_locs = {w.receptacle_at.get(w.in_receptacle.get(lamp, ""), "") for lamp in lamps}
    destination = lamp_locs if goal.task_type == "look_at_obj_in_light" else dest_locs
    if goal.task_type == "look_at_obj_in_light":
        transformed = int(lamp_on)
    elif state_set is not None:
        transformed = min(need, sum(1 for o in targets if o in state_set))
    else:
        transformed = 0
    return {
        "seen": min(need, sum(1 for o in targets if o in seen)),
        "held": int(bool(holding)),
        "transformed": transformed,
        "at_destination": int(bool(holding) and w.at in destination),
        "placed": sum(1 for s in best if s == len(names)) if "placed" in names else 0,
        "subgoals_done": sum(best),
        "subgoals_total": need * len(names),
        "visited": len((set(visited) | {w.at}) & set(w.receptacle_at.values())),
        "opened": len(w.opened),
        "holding_any": int(bool(w.held)),
    }
