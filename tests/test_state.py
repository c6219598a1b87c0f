"""Subgoal progress and anchors as pure functions of a hand-built world state."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rspo_kit.envs.alfworld.state import GoalInfo, WorldState, anchor, progress, visible_objects

_RECEPTACLE_AT = {"fridge 1": "loc 1", "countertop 1": "loc 2", "cabinet 1": "loc 3", "microwave 1": "loc 4"}
KITCHEN = WorldState(
    at="loc 0",
    held=frozenset(),
    opened=frozenset(),
    openable=frozenset({"fridge 1", "cabinet 1"}),
    in_receptacle={"apple 1": "fridge 1", "apple 2": "countertop 1", "mug 1": "cabinet 1"},
    receptacle_at=_RECEPTACLE_AT,
    otype={"apple 1": "apple", "apple 2": "apple", "mug 1": "mug"},
    rtype={name: name.split()[0] for name in _RECEPTACLE_AT},  # "fridge 1" is a fridge
)
HEAT = GoalInfo("pick_heat_then_place_in_recep", "apple", "cabinet")
TWO = GoalInfo("pick_two_obj_and_place", "apple", "cabinet")


def _without(w: WorldState, obj: str) -> dict:
    return {o: r for o, r in w.in_receptacle.items() if o != obj}


def test_visibility_respects_closed_receptacles():
    assert visible_objects(replace(KITCHEN, at="loc 1")) == set()  # fridge closed
    assert visible_objects(replace(KITCHEN, at="loc 1", opened=frozenset({"fridge 1"}))) == {"apple 1"}
    assert visible_objects(replace(KITCHEN, at="loc 2")) == {"apple 2"}


@pytest.mark.parametrize(
    "change, expected_done",
    [
        ({}, 0),
        ({"at": "loc 2"}, 1),  # apple 2 seen on the countertop
        ({"held": frozenset({"apple 2"})}, 2),
        ({"held": frozenset({"apple 2"}), "hot": frozenset({"apple 2"})}, 3),
        ({"held": frozenset({"apple 2"}), "hot": frozenset({"apple 2"}), "at": "loc 3"}, 4),
        ({"held": frozenset({"apple 2"}), "at": "loc 3"}, 2),  # at the destination, but not hot yet
        ({"in_receptacle": {"apple 2": "cabinet 1"}, "hot": frozenset({"apple 2"})}, 5),
        ({"in_receptacle": {"apple 2": "cabinet 1"}}, 1),  # placed cold: only "seen" counts
    ],
)
def test_heat_task_stages(change, expected_done):
    w = replace(KITCHEN, **change)
    p = progress(w, HEAT, seen={"apple 2"} if "in_receptacle" in change else ())
    assert p["subgoals_done"] == expected_done and p["subgoals_total"] == 5


def test_two_object_task_counts_both_objects():
    one_placed = replace(KITCHEN, in_receptacle={**_without(KITCHEN, "apple 2"), "apple 2": "cabinet 1"})
    p = progress(one_placed, TWO, seen={"apple 2"})
    assert (p["placed"], p["seen"], p["subgoals_done"], p["subgoals_total"]) == (1, 1, 4, 8)
    both_held_then_placed = replace(
        one_placed, held=frozenset({"apple 1"}), in_receptacle=_without(one_placed, "apple 1"), at="loc 3"
    )
    p = progress(both_held_then_placed, TWO, seen={"apple 1", "apple 2"})
    assert (p["placed"], p["seen"], p["at_destination"], p["subgoals_done"]) == (1, 2, 1, 7)


def test_seen_is_sticky_through_the_seen_set():
    assert progress(KITCHEN, HEAT)["seen"] == 0
    assert progress(KITCHEN, HEAT, seen={"apple 1"})["seen"] == 1


def test_look_task_needs_lamp_on_and_object_in_hand_at_the_lamp():
    w = replace(
        KITCHEN,
        in_receptacle={**KITCHEN.in_receptacle, "desklamp 1": "countertop 1"},
        otype={**KITCHEN.otype, "desklamp 1": "desklamp"},
    )
    goal = GoalInfo("look_at_obj_in_light", "mug", "", "desklamp")
    holding = replace(w, held=frozenset({"mug 1"}), in_receptacle=_without(w, "mug 1"))
    assert progress(holding, goal)["subgoals_done"] == 2
    lit = replace(holding, toggled=frozenset({"desklamp 1"}))
    assert progress(lit, goal)["subgoals_done"] == 3
    assert progress(replace(lit, at="loc 2"), goal)["subgoals_done"] == 4


def test_anchor_depends_on_state_only():
    assert anchor(KITCHEN) == anchor(replace(KITCHEN))
    assert anchor(KITCHEN) != anchor(replace(KITCHEN, at="loc 1"))
    assert anchor(KITCHEN) != anchor(replace(KITCHEN, opened=frozenset({"fridge 1"})))
    assert anchor(KITCHEN) != anchor(replace(KITCHEN, hot=frozenset({"apple 1"})))


def test_task_agnostic_counters():
    w = replace(KITCHEN, at="loc 2", opened=frozenset({"fridge 1"}), held=frozenset({"mug 1"}))
    p = progress(w, HEAT, visited={"loc 0", "loc 1"})  # loc 0 is the start, no receptacle there
    assert (p["visited"], p["opened"], p["holding_any"]) == (2, 1, 1)
