"""Seeded generator of ALFWorld scenes and tasks, written as ``game.tw-pddl`` files.

The alfworld package ships the PDDL domain (``alfred.pddl``) and grammar (``alfred.twl2``) but no games.
This module builds them: a *layout* (room type + layout id) fixes the receptacles; a *task seed* fixes
the objects, the goal and where everything starts. The output is what alfworld's own wrappers load:

* ``game.tw-pddl`` — JSON with ``pddl_domain``, ``grammar`` (the task text in place of ``UNKNOWN GOAL``),
  ``pddl_problem`` and ``solvable``;
* ``traj_data.json`` — the minimal record alfworld's experts read (``task_type``, ``pddl_params``).

Names follow ALFRED's mangling (``Apple|+01.25|+00.90|-02.10`` → ``Apple_bar__plus_01_dot_25...``) so
that alfworld's demangler prints ``apple 1`` and ``sinkbasin 1``. The object/receptacle vocabulary and the
``canContain`` relation come from ``alfworld.gen.constants`` (ALFRED's own tables); the per-room
choice of receptacles and objects is curated in ``data/alfworld/rooms.json``.

Generation is pure Python, deterministic (string-seeded ``random.Random``), and needs no planner;
solvability holds by construction and is checked against the real planner in the tests.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from rspo_kit.paths import atomic_write_text, data_dir

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
ROOMS: tuple[str, ...] = ("kitchen", "livingroom", "bedroom", "bathroom")

# Rooms in which ALFRED defines each task type (alfworld.gen.constants.GOALS_VALID).
TASK_ROOMS: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ROOMS,
    "look_at_obj_in_light": ("livingroom", "bedroom"),
    "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
    "pick_heat_then_place_in_recep": ("kitchen",),
    "pick_cool_then_place_in_recep": ("kitchen",),
    "pick_two_obj_and_place": ROOMS,
}

# The appliance each transform task needs, and the object property (VAL_ACTION_OBJECTS key).
TRANSFORMS: dict[str, tuple[str, str]] = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}

# Task texts, ALFRED's templates (alfworld.gen.goal_library).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ("put a {obj} in {recep}", "put some {obj} on {recep}"),
    "look_at_obj_in_light": ("look at {obj} under the {toggle}", "examine the {obj} with the {toggle}"),
    "pick_clean_then_place_in_recep": (
        "put a clean {obj} in {recep}",
        "clean some {obj} and put it in {recep}",
    ),
    "pick_heat_then_place_in_recep": ("put a hot {obj} in {recep}", "heat some {obj} and put it in {recep}"),
    "pick_cool_then_place_in_recep": ("put a cool {obj} in {recep}", "cool some {obj} and put it in {recep}"),
    "pick_two_obj_and_place": ("put two {obj} in {recep}", "find two {obj} and put them in {recep}"),
}

OPENABLE = frozenset({"Fridge", "Cabinet", "Microwave", "Drawer", "Safe", "Box"})
# Types the domain's actions name as constants; the problem must declare them.
DOMAIN_OTYPES = ("KnifeType", "ButterKnifeType")
DOMAIN_RTYPES = ("SinkBasinType", "MicrowaveType", "FridgeType")
# ALFRED names sink and bathtub basins after their parent: Sink|...|SinkBasin -> "sinkbasin 1".
BASIN_PARENT = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}


@dataclass(frozen=True)
class SceneKnobs:
    """Difficulty knobs. Ranges are inclusive ``(low, high)`` and sampled per scene."""

    n_receptacles: tuple[int, int] = (8, 12)
    n_distractors: tuple[int, int] = (4, 10)
    n_targets: tuple[int, int] = (1, 3)
    closed_fraction: float = 1.0  # share of openable receptacles that start closed

    def __post_init__(self) -> None:
        for name in ("n_receptacles", "n_distractors", "n_targets"):
            low, high = getattr(self, name)
            if not (0 <= low <= high):
                raise ValueError(
                    f"SceneKnobs.{name} must be (low, high) with 0 <= low <= high, got {(low, high)}"
                )
        if self.n_receptacles[0] < 3:
            raise ValueError(
                f"SceneKnobs.n_receptacles must allow at least 3 receptacles, got {self.n_receptacles}"
            )
        if self.n_targets[0] < 1:
            raise ValueError(f"SceneKnobs.n_targets must start at 1 or more, got {self.n_targets}")
        if not 0.0 <= self.closed_fraction <= 1.0:
            raise ValueError(f"SceneKnobs.closed_fraction must be in [0, 1], got {self.closed_fraction}")


@dataclass(frozen=True)
class TaskSpec:
    """Everything that determines one generated game. Same spec, byte-identical game."""

    id: str
    task_type: str
    room: str
    layout: int
    seed: int
    knobs: SceneKnobs = field(default_factory=SceneKnobs)

    def __post_init__(self) -> None:
        if self.task_type not in TASK_TYPES:
            raise ValueError(f"TaskSpec.task_type must be one of {TASK_TYPES}, got {self.task_type!r}")
        if self.room not in TASK_ROOMS[self.task_type]:
            raise ValueError(
                f"TaskSpec.room for {self.task_type} must be one of {TASK_ROOMS[self.task_type]}, got {self.room!r}"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TaskSpec:
        knobs = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get("knobs", {}).items()}
        return cls(**{**d, "knobs": SceneKnobs(**knobs)})


@dataclass(frozen=True)
class Receptacle:
    id: str  # ALFRED id, e.g. "Cabinet|+01.25|+00.90|-02.10"
    rtype: str
    location: str  # e.g. "loc|4|-8|1|45"
    opened: bool
    openable: bool


@dataclass(frozen=True)
class Item:
    id: str
    otype: str
    receptacle: str  # id of the receptacle it starts in


@dataclass(frozen=True)
class Goal:
    task_type: str
    object_type: str
    dest_type: str = ""  # receptacle type to place into ("" for look_at_obj_in_light)
    toggle_type: str = ""  # lamp type for look_at_obj_in_light


@dataclass(frozen=True)
class Scene:
    spec: TaskSpec
    receptacles: tuple[Receptacle, ...]
    items: tuple[Item, ...]
    start_location: str
    goal: Goal
    task_text: str


# ----------------------------------------------------------------------------- vocabulary


@cache
def room_vocab() -> dict:
    vocab = json.loads((data_dir() / "alfworld" / "rooms.json").read_text())
    vocab.pop("_doc", None)
    return vocab


@cache
def _alfred_constants():
    # alfworld.gen.constants is a plain data module (ALFRED's tables); importing it is cheap.
    from alfworld.gen import constants

    return constants


def can_contain(rtype: str, otype: str) -> bool:
    return otype in _alfred_constants().VAL_RECEPTACLE_OBJECTS.get(rtype, ())


def has_property(otype: str, prop: str) -> bool:
    return otype in _alfred_constants().VAL_ACTION_OBJECTS[prop]


# ----------------------------------------------------------------------------- naming


def _coord(v: float) -> str:
    return f"{v:+06.2f}"


def mangle(alfred_id: str) -> str:
    """ALFRED id -> PDDL-safe name, the inverse of alfworld's Demangler."""
    for src, dst in (("|", "_bar_"), ("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        alfred_id = alfred_id.replace(src, dst)
    return alfred_id


class _Coords:
    """Unique random coordinates for object ids and locations."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def object_id(self, otype: str, suffix: str = "") -> str:
        while True:
            xyz = "|".join(_coord(self.rng.uniform(-5.0, 5.0)) for _ in range(3))
            oid = f"{BASIN_PARENT.get(otype, otype)}|{xyz}" + (
                f"|{otype}" if otype in BASIN_PARENT else suffix
            )
            if oid not in self.used:
                self.used.add(oid)
                return oid

    def location(self) -> str:
        while True:
            r = self.rng
            loc = (
                f"loc|{r.randint(-20, 20)}|{r.randint(-20, 20)}|{r.randint(0, 3)}|{r.choice((0, 30, 45, 60))}"
            )
            if loc not in self.used:
                self.used.add(loc)
                return loc


# ----------------------------------------------------------------------------- generation


def _layout(room: str, layout: int, knobs: SceneKnobs) -> list[tuple[str, str, str]]:
    """(rtype, alfred id, location) of every receptacle of a layout, in a fixed order."""
    rng = random.Random(f"layout|{room}|{layout}|{knobs.n_receptacles}")
    bounds = room_vocab()[room]["receptacles"]
    counts = {rtype: lo for rtype, (lo, _) in bounds.items()}
    total = rng.randint(*knobs.n_receptacles)
    while sum(counts.values()) < total:
        growable = [rtype for rtype, (_, hi) in bounds.items() if counts[rtype] < hi]
        if not growable:
            break
        counts[rng.choice(growable)] += 1
    coords = _Coords(rng)
    return [
        (rtype, coords.object_id(rtype), coords.location())
        for rtype in sorted(counts)
        for _ in range(counts[rtype])
    ]


def generate_scene(spec: TaskSpec) -> Scene:
    """Build the scene of ``spec``; deterministic in the spec alone."""
    vocab = room_vocab()[spec.room]
    knobs = spec.knobs
    layout = _layout(spec.room, spec.layout, knobs)
    rng = random.Random(f"task|{spec.task_type}|{spec.room}|{spec.layout}|{spec.seed}")
    coords = _Coords(rng)
    coords.used.update(rid for _, rid, _ in layout)
    coords.used.update(loc for _, _, loc in layout)
    present = {rtype for rtype, _, _ in layout}

    goal = _sample_goal(spec.task_type, vocab, present, rng)
    openable_ids = [rid for rtype, rid, _ in layout if rtype in OPENABLE]
    n_closed = round(knobs.closed_fraction * len(openable_ids))
    closed = set(rng.sample(openable_ids, n_closed))
    receptacles = tuple(
        Receptacle(
            rid, rtype, loc, opened=rtype in OPENABLE and rid not in closed, openable=rtype in OPENABLE
        )
        for rtype, rid, loc in layout
    )

    def sources(otype: str) -> list[Receptacle]:
        # Where an object may start: any receptacle that can hold it, except the goal's destination type.
        return [r for r in receptacles if can_contain(r.rtype, otype) and r.rtype != goal.dest_type]

    items: list[Item] = []
    n_targets = rng.randint(*knobs.n_targets)
    if spec.task_type == "pick_two_obj_and_place":
        n_targets = max(2, n_targets)
    for _ in range(n_targets):
        items.append(
            Item(
                coords.object_id(goal.object_type), goal.object_type, rng.choice(sources(goal.object_type)).id
            )
        )
    if goal.toggle_type:
        stands = [r for r in receptacles if r.rtype in vocab["lamps"][goal.toggle_type]]
        items.append(Item(coords.object_id(goal.toggle_type), goal.toggle_type, rng.choice(stands).id))

    distractor_types = [
        o
        for o in vocab["objects"]
        if o != goal.object_type and any(can_contain(r.rtype, o) for r in receptacles)
    ]
    for _ in range(rng.randint(*knobs.n_distractors)):
        otype = rng.choice(distractor_types)
        holders = [r for r in receptacles if can_contain(r.rtype, otype)]
        items.append(Item(coords.object_id(otype), otype, rng.choice(holders).id))

    template = rng.choice(TEMPLATES[spec.task_type])
    task_text = template.format(
        obj=goal.object_type.lower(), recep=goal.dest_type.lower(), toggle=goal.toggle_type.lower()
    )
    return Scene(spec, receptacles, tuple(items), coords.location(), goal, task_text)


def _sample_goal(task_type: str, vocab: dict, present: set[str], rng: random.Random) -> Goal:
    if task_type == "look_at_obj_in_light":
        lamp = sorted(vocab["lamps"])[0]
        if not present & set(vocab["lamps"][lamp]):
            raise ValueError(f"layout has no receptacle to stand a {lamp} on")
        targets = [o for o in vocab["objects"] if any(can_contain(r, o) for r in present)]
        return Goal(task_type, rng.choice(targets), toggle_type=lamp)

    appliance, prop = TRANSFORMS.get(task_type, ("", ""))
    if appliance and appliance not in present:
        raise ValueError(f"{task_type} needs a {appliance}, absent from this layout")
    options = []
    for otype in vocab["objects"]:
        if prop and not has_property(otype, prop):
            continue
        sources = [r for r in present if can_contain(r, otype)]
        for dest in sorted(present):
            if dest == appliance or not can_contain(dest, otype):
                continue
            if any(s != dest for s in sources):
                options.append((otype, dest))
    if not options:
        raise ValueError(f"no feasible (object, destination) for {task_type} in this layout")
    otype, dest = rng.choice(options)
    return Goal(task_type, otype, dest_type=dest)


# ----------------------------------------------------------------------------- PDDL


def _goal_pddl(goal: Goal) -> str:
    o, d = f"{goal.object_type}Type", f"{goal.dest_type}Type"
    if goal.task_type == "look_at_obj_in_light":
        return (
            f"(and (exists (?o - object) (and (objectType ?o {o}) (holds agent1 ?o)))\n"
            f"     (exists (?t - object ?l - location) (and (objectType ?t {goal.toggle_type}Type) (isToggled ?t)"
            " (objectAtLocation ?t ?l) (atLocation agent1 ?l))))"
        )
    if goal.task_type == "pick_two_obj_and_place":
        return (
            f"(exists (?r - receptacle ?o1 - object ?o2 - object) (and (receptacleType ?r {d})"
            f" (objectType ?o1 {o}) (objectType ?o2 {o}) (inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r)"
            " (not (= ?o1 ?o2))))"
        )
    state = {
        "pick_clean_then_place_in_recep": " (isClean ?o)",
        "pick_heat_then_place_in_recep": " (isHot ?o)",
        "pick_cool_then_place_in_recep": " (isCool ?o)",
    }.get(goal.task_type, "")
    return (
        f"(exists (?r - receptacle ?o - object) (and (receptacleType ?r {d}) (objectType ?o {o})"
        f" (inReceptacle ?o ?r){state}))"
    )


def problem_pddl(scene: Scene) -> str:
    """The PDDL problem of a scene, in the layout of ALFWorld's ``initial_state.pddl``."""
    recs = {r.id: r for r in scene.receptacles}
    otypes = sorted({i.otype + "Type" for i in scene.items} | set(DOMAIN_OTYPES))
    rtypes = sorted({r.rtype + "Type" for r in scene.receptacles} | set(DOMAIN_RTYPES))
    locations = sorted({r.location for r in scene.receptacles} | {scene.start_location})
    props = _alfred_constants().VAL_ACTION_OBJECTS
    movable = set(_alfred_constants().MOVABLE_RECEPTACLES)

    objects = ["agent1 - agent"]
    objects += [f"{t} - otype" for t in otypes] + [f"{t} - rtype" for t in rtypes]
    objects += [f"{mangle(i.id)} - object" for i in scene.items]
    objects += [f"{mangle(r.id)} - receptacle" for r in scene.receptacles]
    objects += [f"{mangle(loc)} - location" for loc in locations]

    init = [f"(atLocation agent1 {mangle(scene.start_location)})"]
    for r in scene.receptacles:
        init.append(f"(receptacleType {mangle(r.id)} {r.rtype}Type)")
        init.append(f"(receptacleAtLocation {mangle(r.id)} {mangle(r.location)})")
        if r.openable:
            init.append(f"(openable {mangle(r.id)})")
        if r.opened:
            init.append(f"(opened {mangle(r.id)})")
    lamp_types = {scene.goal.toggle_type} - {""}
    for i in scene.items:
        name, rec = mangle(i.id), recs[i.receptacle]
        init.append(f"(objectType {name} {i.otype}Type)")
        init.append(f"(inReceptacle {name} {mangle(rec.id)})")
        init.append(f"(objectAtLocation {name} {mangle(rec.location)})")
        if i.otype in lamp_types:
            init.append(f"(toggleable {name})")
            continue
        init.append(f"(pickupable {name})")
        for prop, pred in (
            ("Cleanable", "cleanable"),
            ("Heatable", "heatable"),
            ("Coolable", "coolable"),
            ("Sliceable", "sliceable"),
        ):
            if i.otype in props[prop]:
                init.append(f"({pred} {name})")
        if i.otype in movable:
            init.append(f"(isReceptacleObject {name})")
    present_otypes = {i.otype for i in scene.items}
    for rtype in sorted({r.rtype for r in scene.receptacles}):
        init += [f"(canContain {rtype}Type {o}Type)" for o in sorted(present_otypes) if can_contain(rtype, o)]

    indent = "\n        "
    return (
        f"(define (problem {scene.spec.id.replace('/', '_')})\n(:domain alfred)\n(:objects{indent}"
        + indent.join(objects)
        + f"\n)\n(:init{indent}"
        + indent.join(init)
        + f"\n)\n(:goal\n    {_goal_pddl(scene.goal)}\n)\n)\n"
    )


@cache
def _alfworld_logic() -> tuple[str, str]:
    base = resources.files("alfworld") / "data"
    return (base / "alfred.pddl").read_text(), (base / "alfred.twl2").read_text()


def game_json(scene: Scene) -> dict:
    domain, grammar = _alfworld_logic()
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", scene.task_text),
        "pddl_problem": problem_pddl(scene),
        "solvable": True,
    }


def traj_data(scene: Scene) -> dict:
    g = scene.goal
    return {
        "task_type": g.task_type,
        "pddl_params": {
            "object_target": g.object_type,
            "parent_target": g.dest_type,
            "toggle_target": g.toggle_type,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "task_desc": scene.task_text,
        "rspo_kit": {"spec": scene.spec.to_dict(), "generator": "rspo_kit.envs.alfworld.scenes/1"},
    }


def write_game(spec: TaskSpec, root: Path) -> Path:
    """Write ``game.tw-pddl`` and ``traj_data.json`` for ``spec`` under ``root`` (cached); returns the game path."""
    folder = root / spec.task_type / spec.id.replace("/", "_")
    game_path = folder / "game.tw-pddl"
    if game_path.is_file() and (folder / "traj_data.json").is_file():
        return game_path
    scene = generate_scene(spec)
    atomic_write_text(folder / "traj_data.json", json.dumps(traj_data(scene), sort_keys=True, indent=1))
    atomic_write_text(game_path, json.dumps(game_json(scene), sort_keys=True))
    return game_path
