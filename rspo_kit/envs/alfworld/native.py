"""ALFWorld's semantics in pure Python: a fast engine, transcript-identical to the real one on our scenes.

The real engine (textworld's PddlEnv on fast-downward) re-derives grammar text for every admissible
command at every step. This module implements the same game directly for the scenes that
``scenes.generate_scene`` builds:

* the actions and preconditions of alfworld's ``alfred.pddl`` (GotoLocation, OpenObject, CloseObject,
  PickupObject, PutObject, Clean/Heat/Cool/Toggle/SliceObject, look, inventory, examineReceptacle,
  examineObject, help) as pure functions over a frozen ``NativeState``;
* the feedback texts of ``alfred.twl2``, including textworld's list formatting and its fact order
  (facts are sorted by argument id, so lists follow the mangled ids);
* names exactly as alfworld's ``Demangler`` numbers them;
* the admissible commands sorted and de-duplicated as ``PddlEnv._gather_infos`` does;
* the goal formulas that ``scenes._goal_pddl`` writes;
* an optimal expert: uniform-cost search under the domain's action costs.

Everything that process rewards and GiGPO read goes through ``state.WorldState``, so both engines
agree on ``progress`` and ``anchor`` by construction. ``tests/test_alfworld_native.py`` checks the
transcripts against the real engine step by step.

Why one module of this length: every action, its preconditions and its feedback text must agree with
the real engine to the character (``tests/test_alfworld_native.py`` compares whole transcripts), and
they read one another's state and phrasing; split apart, a change to one would hide its twin.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import count
from pathlib import Path
from typing import Literal

from rspo_kit.envs.alfworld.episode import AlfworldEpisode
from rspo_kit.envs.alfworld.scenes import (
    Scene,
    TaskSpec,
    _alfred_constants,
    can_contain,
    generate_scene,
    mangle,
)
from rspo_kit.envs.alfworld.state import OBJECT_CONDITIONS, GoalInfo, WorldState
from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, normalize_command

INVALID_FEEDBACK = "Nothing happens."

# alfred.twl2, action "help" (the grammar's "\n" escapes expanded; textworld drops the leading one).
HELP_TEXT = (
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n"
)

# alfred.pddl: (increase (total-cost) ...) of each action; look/inventory/examine/help cost nothing
# and change nothing the goal reads, so the planner never uses them.
ACTION_COST = {
    "goto": 1,
    "open": 1,
    "close": 1,
    "take": 1,
    "move": 1,
    "clean": 5,
    "heat": 5,
    "cool": 5,
    "use": 5,
}
KNIFE_TYPES = frozenset({"knife", "butterknife"})  # SliceObject: (objectType ?ko KnifeType|ButterKnifeType)


# ----------------------------------------------------------------------------- the static world


@dataclass(frozen=True)
class ObjectInfo:
    name: str  # demangled, e.g. "apple 1"
    otype: str  # lower-case type, e.g. "apple"
    pickupable: bool
    cleanable: bool
    heatable: bool
    coolable: bool
    sliceable: bool
    toggleable: bool
    receptacle_object: bool  # isReceptacleObject: examine says "This is a normal ..."


@dataclass(frozen=True)
class ReceptacleInfo:
    name: str
    rtype: str
    location: str  # demangled, e.g. "loc 4"
    openable: bool


@dataclass(frozen=True)
class World:
    """What never changes in an episode. Objects and receptacles are listed in mangled-id order,
    the order in which textworld's sorted facts list them."""

    objects: Mapping[str, ObjectInfo]
    receptacles: Mapping[str, ReceptacleInfo]
    receptacle_at: Mapping[str, str]  # location -> the receptacle there (one per location in our scenes)
    start: str
    goal: GoalInfo
    intro: str
    object_order: tuple[str, ...]  # index of each object in NativeState.placement
    can_contain: frozenset[tuple[str, str]]  # (rtype, otype)
    # The static parts of state.WorldState, built once rather than at every step.
    openable: frozenset[str] = frozenset()
    location_of: Mapping[str, str] = field(default_factory=dict)  # receptacle -> location
    otype_of: Mapping[str, str] = field(default_factory=dict)
    rtype_of: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NativeState:
    """The dynamic state; hashable, so the planner can search over it."""

    at: str
    held: str  # "" when the hands are empty (PickupObject needs them empty, so at most one object)
    placement: tuple[str, ...]  # receptacle of each object of World.object_order, "" while held
    opened: frozenset[str]
    clean: frozenset[str] = frozenset()
    hot: frozenset[str] = frozenset()
    cool: frozenset[str] = frozenset()
    toggled: frozenset[str] = frozenset()
    sliced: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Act:
    """A grounded action: its kind (a key of TRANSITIONS) and arguments."""

    kind: str
    obj: str = ""
    rec: str = ""
    tool: str = ""  # the knife of a slice


def demangled_names(ids: list[str]) -> dict[str, str]:
    """Display names of PDDL ids, numbered as alfworld's ``Demangler`` (agents/utils/misc.py) does.

    Ids are sorted and each base name gets numbers 1..n popped from the *end* of its list, so the first
    sorted id of a kind gets the highest number. Ids without ``_bar_`` keep their text and a trailing
    space (``"agent1 "``), as in alfworld.

    >>> demangled_names(["mug_bar_2", "mug_bar_1", "agent1"])
    {'agent1': 'agent1 ', 'mug_bar_1': 'mug 2', 'mug_bar_2': 'mug 1'}
    """
    ids = sorted(ids)

    def base(i: str) -> str:
        # alfworld appends "basin" so that Sink|...|SinkBasin reads "sinkbasin" (a substring test on the id).
        return i.split("_bar_", 1)[0] + ("basin" if "basin" in i else "")

    counts = Counter(base(i) for i in ids if "_bar_" in i)
    numbers = {name: list(range(1, n + 1)) for name, n in counts.items()}
    names = {}
    for i in ids:
        if "_bar_" not in i:
            names[i] = f"{_demangle_text(i)} "
        else:
            names[i] = f"{base(i)} {numbers[base(i)].pop()}"
    return names


def _demangle_text(i: str) -> str:
    for src, dst in (("_bar_", "|"), ("_minus_", "-"), ("_plus_", "+"), ("_dot_", "."), ("_comma_", ",")):
        i = i.replace(src, dst)
    return i


def build_world(scene: Scene) -> tuple[World, NativeState]:
    """Compile a generated scene into the static world and the initial state."""
    # fast-downward lower-cases every PDDL name; the Demangler sorts and numbers those lower-case ids.
    pid = {x: mangle(x).lower() for x in [r.id for r in scene.receptacles] + [i.id for i in scene.items]}
    locations = {r.location for r in scene.receptacles} | {scene.start_location}
    pid.update({loc: mangle(loc).lower() for loc in locations})
    names = demangled_names(list(pid.values()))
    name = {x: names[p] for x, p in pid.items()}

    props = _alfred_constants().VAL_ACTION_OBJECTS
    movable = set(_alfred_constants().MOVABLE_RECEPTACLES)
    lamp_types = {scene.goal.toggle_type} - {""}
    receptacles = {
        name[r.id]: ReceptacleInfo(name[r.id], r.rtype.lower(), name[r.location], r.openable)
        for r in sorted(scene.receptacles, key=lambda r: pid[r.id])
    }
    objects = {}
    for i in sorted(scene.items, key=lambda i: pid[i.id]):
        lamp = i.otype in lamp_types  # scenes.problem_pddl: lamps are toggleable and nothing else
        objects[name[i.id]] = ObjectInfo(
            name=name[i.id],
            otype=i.otype.lower(),
            pickupable=not lamp,
            cleanable=not lamp and i.otype in props["Cleanable"],
            heatable=not lamp and i.otype in props["Heatable"],
            coolable=not lamp and i.otype in props["Coolable"],
            sliceable=not lamp and i.otype in props["Sliceable"],
            toggleable=lamp,
            receptacle_object=not lamp and i.otype in movable,
        )
    receptacle_at = {info.location: r for r, info in receptacles.items()}
    if len(receptacle_at) != len(receptacles):
        raise ValueError("the native engine assumes one receptacle per location, as scenes.py generates")
    goal = GoalInfo(
        scene.goal.task_type,
        scene.goal.object_type.lower(),
        scene.goal.dest_type.lower(),
        scene.goal.toggle_type.lower(),
    )
    order = tuple(objects)
    where = {name[i.id]: name[i.receptacle] for i in scene.items}
    rtypes = {r.rtype for r in scene.receptacles}
    otypes = {i.otype for i in scene.items}
    world = World(
        objects=objects,
        receptacles=receptacles,
        receptacle_at=receptacle_at,
        start=name[scene.start_location],
        goal=goal,
        intro="",
        object_order=order,
        can_contain=frozenset(
            (rt.lower(), ot.lower()) for rt in rtypes for ot in otypes if can_contain(rt, ot)
        ),
        openable=frozenset(r for r, info in receptacles.items() if info.openable),
        location_of={r: info.location for r, info in receptacles.items()},
        otype_of={o: info.otype for o, info in objects.items()},
        rtype_of={r: info.rtype for r, info in receptacles.items()},
    )
    state = NativeState(
        at=world.start,
        held="",
        placement=tuple(where[o] for o in order),
        opened=frozenset(name[r.id] for r in scene.receptacles if r.opened),
    )
    # alfred.twl2 "intro": the look feedback (with nothing bound, so every receptacle is listed) and the task.
    intro = (
        "-= Welcome to TextWorld, ALFRED! =-\n\n"
        f"{_look_feedback(world, state, bound=False)}\n\n"
        f"Your task is to: {scene.task_text}."
    )
    return replace(world, intro=intro), state


# ----------------------------------------------------------------------------- queries


def _contents(world: World, state: NativeState, rec: str) -> list[str]:
    """Objects in a receptacle, in textworld's fact order (mangled ids)."""
    return [o for o, r in zip(world.object_order, state.placement, strict=True) if r == rec]


def _accessible(world: World, state: NativeState, rec: str) -> bool:
    """(or (not (openable ?r)) (opened ?r))"""
    return not world.receptacles[rec].openable or rec in state.opened


def _listing(items: list[str]) -> str:
    """textworld's display_list with alfred.twl2's separators: "a x, a y, and a z"; "nothing" if empty."""
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


def _placement_of(world: World, state: NativeState) -> dict[str, str]:
    return {o: r for o, r in zip(world.object_order, state.placement, strict=True) if r}


# ----------------------------------------------------------------------------- admissible actions


def applicable(world: World, state: NativeState) -> dict[str, Act]:
    """Every applicable grounded action, keyed by its command text (alfred.twl2 templates)."""
    acts: dict[str, Act] = {"look": Act("look"), "inventory": Act("inventory"), "help": Act("help")}
    for rec, info in world.receptacles.items():
        # The real engine never offers GotoLocation(l, l) (fast-downward's grounding drops it).
        if info.location != state.at:
            acts[f"go to {rec}"] = Act("goto", rec=rec)
    here = world.receptacle_at.get(state.at)
    held = state.held
    if held:
        # examineObject's other disjunct (the object in an open receptacle here) does not survive
        # fast-downward's grounding: the real engine offers "examine" only for the held object.
        acts[f"examine {held}"] = Act("examine_object", obj=held)
    if here is None:
        return acts
    info = world.receptacles[here]
    acts[f"examine {here}"] = Act("examine_receptacle", rec=here)
    if info.openable:
        if here in state.opened:
            acts[f"close {here}"] = Act("close", rec=here)
        else:
            acts[f"open {here}"] = Act("open", rec=here)
    open_here = _accessible(world, state, here)
    knife = held if held and world.objects[held].otype in KNIFE_TYPES else ""
    for obj in _contents(world, state, here):
        o = world.objects[obj]
        if open_here and o.pickupable and not held:
            acts[f"take {obj} from {here}"] = Act("take", obj=obj, rec=here)
        if o.toggleable:  # ToggleObject needs the object here, not an open receptacle
            acts[f"use {obj}"] = Act("use", obj=obj, rec=here)
        if knife and o.sliceable:  # SliceObject reads objectAtLocation, which closed receptacles keep
            acts[f"slice {obj} with {knife}"] = Act("slice", obj=obj, tool=knife)
    if held:
        o = world.objects[held]
        if open_here and (info.rtype, o.otype) in world.can_contain:
            acts[f"move {held} to {here}"] = Act("move", obj=held, rec=here)
        if o.cleanable and info.rtype == "sinkbasin":
            acts[f"clean {held} with {here}"] = Act("clean", obj=held, rec=here)
        if o.heatable and info.rtype == "microwave":
            acts[f"heat {held} with {here}"] = Act("heat", obj=held, rec=here)
        if o.coolable and info.rtype == "fridge":
            acts[f"cool {held} with {here}"] = Act("cool", obj=held, rec=here)
    return acts


# ----------------------------------------------------------------------------- effects


def _evolve(
    s: NativeState,
    at: str | None = None,
    held: str | None = None,
    placement: tuple[str, ...] | None = None,
    opened: frozenset[str] | None = None,
    clean: frozenset[str] | None = None,
    hot: frozenset[str] | None = None,
    cool: frozenset[str] | None = None,
    toggled: frozenset[str] | None = None,
    sliced: frozenset[str] | None = None,
) -> NativeState:
    """``dataclasses.replace`` for NativeState, spelled out: the planner calls it ~10^5 times a plan and
    ``replace`` (which inspects the fields at every call) took most of its time."""
    return NativeState(
        s.at if at is None else at,
        s.held if held is None else held,
        s.placement if placement is None else placement,
        s.opened if opened is None else opened,
        s.clean if clean is None else clean,
        s.hot if hot is None else hot,
        s.cool if cool is None else cool,
        s.toggled if toggled is None else toggled,
        s.sliced if sliced is None else sliced,
    )


def _set_place(world: World, state: NativeState, obj: str, rec: str) -> tuple[str, ...]:
    i = world.object_order.index(obj)
    return (*state.placement[:i], rec, *state.placement[i + 1 :])


def _goto(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, at=world.receptacles[a.rec].location)


def _open(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, opened=s.opened | {a.rec})


def _close(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, opened=s.opened - {a.rec})


def _take(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, held=a.obj, placement=_set_place(world, s, a.obj, ""))


def _move(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, held="", placement=_set_place(world, s, a.obj, a.rec))


def _clean(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, clean=s.clean | {a.obj})


def _heat(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, hot=s.hot | {a.obj}, cool=s.cool - {a.obj})  # HeatObject: (not (isCool ?o))


def _cool(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, cool=s.cool | {a.obj}, hot=s.hot - {a.obj})  # CoolObject: (not (isHot ?o))


def _use(world: World, s: NativeState, a: Act) -> NativeState:
    # isToggled is only ever added (isOn flips, but no text or goal reads it).
    return _evolve(s, toggled=s.toggled | {a.obj})


def _slice(world: World, s: NativeState, a: Act) -> NativeState:
    return _evolve(s, sliced=s.sliced | {a.obj})


def _unchanged(world: World, s: NativeState, a: Act) -> NativeState:
    return s  # look, inventory, examine, help only mark "checked", which nothing reads


TRANSITIONS: dict[str, Callable[[World, NativeState, Act], NativeState]] = {
    "goto": _goto,
    "open": _open,
    "close": _close,
    "take": _take,
    "move": _move,
    "clean": _clean,
    "heat": _heat,
    "cool": _cool,
    "use": _use,
    "slice": _slice,
    "look": _unchanged,
    "inventory": _unchanged,
    "help": _unchanged,
    "examine_receptacle": _unchanged,
    "examine_object": _unchanged,
}


# ----------------------------------------------------------------------------- feedback (alfred.twl2)


def _examine_receptacle(world: World, s: NativeState, rec: str) -> str:
    if world.receptacles[rec].openable:
        if rec not in s.opened:
            return f"The {rec} is closed."
        return f"The {rec} is open. In it, you see {_listing([f'a {o}' for o in _contents(world, s, rec)])}."
    return f"On the {rec}, you see {_listing([f'a {o}' for o in _contents(world, s, rec)])}."


def _examine_object(world: World, s: NativeState, obj: str) -> str:
    # The first rule of examineObject.feedback whose condition holds, in the grammar's order.
    o = world.objects[obj]
    if o.receptacle_object:
        return f"This is a normal {obj}. In it, you see nothing."  # inReceptacleObject never holds
    clean, hot, cool, sliced = obj in s.clean, obj in s.hot, obj in s.cool, obj in s.sliced
    if sliced:
        if clean and hot:
            return f"This is a hot and clean sliced {obj}."
        if clean and cool:
            return f"This is a cool and clean sliced {obj}."
        if clean:
            return f"This is a clean sliced {obj}."
        if hot:
            return f"This is a hot sliced {obj}."
        if cool:
            return f"This is a cool sliced {obj}."
    if clean and hot:
        return f"This is a hot and clean {obj}."
    if clean and cool:
        return f"This is a cool and clean {obj}."
    if hot:
        return f"This is a hot {obj}."
    if clean:
        return f"This is a clean {obj}."
    if cool:
        return f"This is a cold {obj}."
    if o.toggleable and obj in s.toggled:
        return f"This {obj} is on."
    # "toggleable & not_istoggled" never matches: textworld keeps negated facts only once an effect
    # deletes them, and nothing deletes isToggled.
    if o.sliceable and sliced:
        return f"This is a sliced {obj}."
    return f"There's nothing special about {obj}."


def _look_feedback(world: World, s: NativeState, bound: bool = True) -> str:
    here = world.receptacle_at.get(s.at)
    if here is not None:
        # Nothing is ever "next to" a receptacle: an object at a location is always in its one receptacle.
        return f"You are facing the {here}. Next to it, you see nothing."
    # In the intro no location is bound, so list_appliances lists every receptacle; after the look
    # action it is bound to the agent's location, where no receptacle stands.
    listed = [f"a {r}" for r in world.receptacles] if not bound else []
    return f"You are in the middle of a room. Looking quickly around you, you see {_listing(listed)}."


def feedback(world: World, s: NativeState, a: Act) -> str:
    """The text of ``a`` derived in the state *after* it, as PddlEnv.step does."""
    return _FEEDBACK[a.kind](world, s, a)


_FEEDBACK: dict[str, Callable[[World, NativeState, Act], str]] = {
    "goto": lambda w, s, a: f"You arrive at {a.rec}. {_examine_receptacle(w, s, a.rec)}",
    "open": lambda w, s, a: f"You open the {a.rec}. {_examine_receptacle(w, s, a.rec)}",
    "close": lambda w, s, a: f"You close the {a.rec}.",
    "take": lambda w, s, a: f"You pick up the {a.obj} from the {a.rec}.",
    "move": lambda w, s, a: f"You move the {a.obj} to the {a.rec}.",
    "clean": lambda w, s, a: f"You clean the {a.obj} using the {a.rec}.",
    "heat": lambda w, s, a: f"You heat the {a.obj} using the {a.rec}.",
    "cool": lambda w, s, a: f"You cool the {a.obj} using the {a.rec}.",
    "use": lambda w, s, a: f"You turn on the {a.obj}.",  # istoggled holds after any toggle
    "slice": lambda w, s, a: f"You sliced the {a.obj} with the {a.tool}.",
    "look": lambda w, s, a: _look_feedback(w, s),
    "inventory": lambda w, s, a: (
        f"You are carrying: a {s.held}." if s.held else "You are not carrying anything."
    ),
    "help": lambda w, s, a: HELP_TEXT,
    "examine_receptacle": lambda w, s, a: _examine_receptacle(w, s, a.rec),
    "examine_object": lambda w, s, a: _examine_object(w, s, a.obj),
}


# ----------------------------------------------------------------------------- goal (scenes._goal_pddl)


def goal_reached(world: World, s: NativeState) -> bool:
    g = world.goal
    objs = world.objects
    if g.task_type == "look_at_obj_in_light":
        if not s.held or objs[s.held].otype != g.object_type:
            return False
        place = _placement_of(world, s)
        return any(
            objs[o].otype == g.toggle_type and world.receptacles[place[o]].location == s.at
            for o in s.toggled
            if o in place
        )
    flag = {
        "pick_clean_then_place_in_recep": s.clean,
        "pick_heat_then_place_in_recep": s.hot,
        "pick_cool_then_place_in_recep": s.cool,
    }.get(g.task_type)
    placed = Counter(
        r
        for o, r in zip(world.object_order, s.placement, strict=True)
        if r
        and objs[o].otype == g.object_type
        and world.receptacles[r].rtype == g.dest_type
        and (flag is None or o in flag)
    )
    need = 2 if g.task_type == "pick_two_obj_and_place" else 1
    return any(n >= need for n in placed.values())


# ----------------------------------------------------------------------------- the expert


def _useful(world: World, s: NativeState, a: Act) -> bool:
    """Prune actions that no cost-optimal plan needs (the search stays exact, only smaller)."""
    g = world.goal
    is_target = lambda o: world.objects[o].otype == g.object_type  # noqa: E731
    if a.kind == "goto":
        return True
    if a.kind == "take":
        return is_target(a.obj)  # taking anything else only fills the hands
    if a.kind == "move":
        # A held distractor may go anywhere (to free the hands); a target only where the goal wants it.
        return not is_target(a.obj) or (g.dest_type != "" and world.receptacles[a.rec].rtype == g.dest_type)
    if a.kind == "open":
        # Opening only helps to take a target out or to put something in.
        return any(is_target(o) for o in _contents(world, s, a.rec)) or (
            s.held != ""
            and (world.receptacles[a.rec].rtype, world.objects[s.held].otype) in world.can_contain
        )
    if a.kind in ("clean", "heat", "cool"):
        return is_target(a.obj)
    if a.kind == "use":
        return g.task_type == "look_at_obj_in_light"
    return False  # close, slice, look, inventory, help, examine: never on a cheapest path


_TRANSFORM_FLAG = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "hot",
    "pick_cool_then_place_in_recep": "cool",
}


def _cost_to_go(world: World, s: NativeState) -> int:
    """A lower bound on the cost left (A*'s admissible heuristic): the takes, moves, transforms and
    toggles the goal still needs, ignoring travel and opening."""
    g = world.goal
    held_target = s.held != "" and world.objects[s.held].otype == g.object_type
    if g.task_type == "look_at_obj_in_light":
        lamp_on = any(world.objects[o].toggleable for o in s.toggled)
        return (0 if held_target else 1) + (0 if lamp_on else 5)
    if goal_reached(world, s):
        return 0
    if g.task_type == "pick_two_obj_and_place":
        placed = Counter(
            r
            for o, r in zip(world.object_order, s.placement, strict=True)
            if r and world.objects[o].otype == g.object_type and world.receptacles[r].rtype == g.dest_type
        )
        missing = 2 - max(placed.values(), default=0)
        return 2 * missing - int(held_target)
    flag = _TRANSFORM_FLAG.get(g.task_type)
    transformed = flag is None or any(world.objects[o].otype == g.object_type for o in getattr(s, flag))
    return 1 + (0 if held_target else 1) + (0 if transformed else 5)


def plan(world: World, start: NativeState) -> list[str] | None:
    """A cheapest command sequence to the goal: A* under alfred.pddl's action costs, with an admissible
    heuristic and re-opening of states, so the result is optimal."""
    tie = count()  # deterministic tie-breaking: first pushed, first popped
    frontier: list[tuple[int, int, int, NativeState]] = [(_cost_to_go(world, start), next(tie), 0, start)]
    best = {start: 0}
    parent: dict[NativeState, tuple[NativeState, str]] = {}
    while frontier:
        _, _, cost, s = heapq.heappop(frontier)
        if cost > best[s]:
            continue
        if goal_reached(world, s):
            path = []
            while s in parent:
                s, command = parent[s]
                path.append(command)
            return path[::-1]
        for command, a in sorted(applicable(world, s).items()):
            if not _useful(world, s, a):
                continue
            nxt = TRANSITIONS[a.kind](world, s, a)
            c = cost + ACTION_COST[a.kind]
            if c < best.get(nxt, c + 1):
                best[nxt], parent[nxt] = c, (s, command)
                heapq.heappush(frontier, (c + _cost_to_go(world, nxt), next(tie), c, nxt))
    return None


def plan_cost(commands: list[str]) -> int:
    """Total cost of a command sequence under alfred.pddl's action costs (to compare planners)."""
    kinds = {"go": "goto", "open": "open", "close": "close", "take": "take", "move": "move"}
    kinds |= {"clean": "clean", "heat": "heat", "cool": "cool", "use": "use"}
    return sum(ACTION_COST.get(kinds.get(c.split(" ", 1)[0], ""), 0) for c in commands)


# ----------------------------------------------------------------------------- WorldState for rewards


def world_state(world: World, s: NativeState) -> WorldState:
    """The same WorldState that ``state.world_from_facts`` builds from the real engine's facts."""
    return WorldState(
        at=s.at,
        held=frozenset({s.held} - {""}),
        opened=s.opened,
        openable=world.openable,
        in_receptacle=_placement_of(world, s),
        receptacle_at=world.location_of,
        otype=world.otype_of,
        rtype=world.rtype_of,
        **{name: getattr(s, name) for name in OBJECT_CONDITIONS},
    )


# ----------------------------------------------------------------------------- the env


@lru_cache(maxsize=4096)
def _compiled(spec: TaskSpec) -> tuple[World, NativeState, tuple[str, ...] | None]:
    world, state = build_world(generate_scene(spec))
    walkthrough = plan(world, state)
    return world, state, tuple(walkthrough) if walkthrough is not None else None


def _spec_of(task: Task) -> TaskSpec:
    if "spec" in task.meta:
        return TaskSpec.from_dict(task.meta["spec"])
    if "game_file" in task.meta:
        # A game file rspo_kit generated names its spec in traj_data.json; official ALFWorld games do not.
        traj_path = Path(task.meta["game_file"]).parent / "traj_data.json"
        traj = json.loads(traj_path.read_text()) if traj_path.is_file() else {}
        if "rspo_kit" in traj:
            return TaskSpec.from_dict(traj["rspo_kit"]["spec"])
        raise ValueError(
            f"alfworld task {task.id!r} is an official ALFWorld game, which the native engine does not "
            "support; use make_env('alfworld', engine='alfworld') for it"
        )
    raise ValueError(f"alfworld task {task.id!r} has neither meta['spec'] nor meta['game_file']")


class NativeAlfworldEnv(AlfworldEpisode):
    """The TextEnv for ALFWorld on the native engine (``make_env("alfworld", engine="native")``)."""

    engine = "native"

    def __init__(self, max_steps: int = 50, expert: Literal["planner"] = "planner") -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if expert != "planner":
            raise ValueError(
                f"expert must be 'planner' on the native engine, got {expert!r}; alfworld's hand-coded "
                "expert needs the real engine (engine='alfworld')"
            )
        self.max_steps, self.expert = max_steps, expert
        self.task: Task | None = None
        self._done = True

    # ------------------------------------------------------------------ protocol

    def reset(self, task: Task) -> Observation:
        world, state, walkthrough = _compiled(_spec_of(task))
        self.task, self.goal, self._world_static = task, world.goal, world
        self.instruction = world.intro[world.intro.index("Your task is to: ") + len("Your task is to: ") :]
        self.steps, self._done, self.history = 0, False, []
        self._set_state(state)
        self._begin(list(walkthrough) if walkthrough is not None else None)
        self.last_obs = Observation(world.intro, self._admissible, self.instruction)
        return self.last_obs

    def step(self, action: str) -> StepResult:
        if self._done:
            raise EpisodeOverError("the episode is over; call reset() before step()")
        command = normalize_command(action)
        act = self._acts.get(command)
        valid = act is not None
        if act is not None:
            state = TRANSITIONS[act.kind](self._world_static, self._state, act)
            text = feedback(self._world_static, state, act)
            self._set_state(state)
        else:
            text = INVALID_FEEDBACK
        self.steps += 1
        self._observe(command, valid)
        won = goal_reached(self._world_static, self._state)
        timeout = not won and self.steps >= self.max_steps
        self._done = won or timeout
        self.history.append(command)
        self.last_obs = Observation(text, self._admissible, self.instruction)
        info = self._step_info(command, self.steps, timeout)
        return StepResult(self.last_obs, self._done, won, float(won), valid, info)

    def admissible_actions(self) -> list[str]:
        return list(self._admissible) if self.task is not None else []

    def expert_action(self) -> str | None:
        """Next action of an optimal expert (uniform-cost search), or None once the episode is over."""
        return self._next_planned(lambda: plan(self._world_static, self._state))

    # ------------------------------------------------------------------ helpers

    def _set_state(self, state: NativeState) -> None:
        self._state = state
        self._acts = applicable(self._world_static, state)
        self._admissible = tuple(sorted(self._acts))  # PddlEnv: sorted(set(commands))
        self._world = world_state(self._world_static, state)

    def close(self) -> None:
        pass
