"""Process rewards: doctests, per-env tables, composition properties, and a real ALFWorld episode."""

from __future__ import annotations

import doctest
import math
import pickle
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rspo_kit.rewards as rewards
from rspo_kit.envs.alfworld.state import GoalInfo, WorldState, progress, visible_objects
from rspo_kit.envs.base import Observation, StepResult
from rspo_kit.rewards import (
    PROCESS_REWARDS,
    combine,
    diagnostics,
    episode_steps,
    misalign,
    outcome,
    process,
    process_return,
    process_reward,
    register_process_reward,
    step_rewards,
    weighted,
)
from rspo_kit.rewards import alfworld as alfworld_rewards
from rspo_kit.rewards import webshop as webshop_rewards

ENVS = ("alfworld", "webshop")


# ----------------------------------------------------------------------------- doctests


@pytest.mark.parametrize("module", [outcome, process, alfworld_rewards, webshop_rewards, diagnostics])
def test_module_doctests_pass(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize("env", ENVS)
def test_every_builtin_process_reward_has_a_doctest(env):
    for name in ("subgoal", "heuristic", "hack"):
        reward = process_reward(name, env=env)
        written = getattr(reward, "phi", None) or getattr(reward, "fn", None)  # Φ, or the step's function
        assert written is not None, f"{env}/{name} is registered as {reward!r}, not from a written function"
        assert ">>>" in (written.__doc__ or ""), f"{env}/{name} lacks a doctest example"


# ----------------------------------------------------------------------------- tables

ALF = {
    "seen": 0,
    "held": 0,
    "transformed": 0,
    "at_destination": 0,
    "placed": 0,
    "subgoals_done": 0,
    "subgoals_total": 4,
    "visited": 1,
    "opened": 0,
    "holding_any": 0,
}
WEB = {
    "query_coverage": 0.0,
    "goal_type_viewed": 0,
    "items_viewed": 0,
    "pages_visited": 1,
    "current_reward": 0.0,
    "options_matched": 0,
    "options_total": 2,
}

PROCESS_CASES = [
    # env, name, change of progress, action, valid, expected
    ("alfworld", "subgoal", {"subgoals_done": 1}, "go to countertop 1", True, 0.25),
    ("alfworld", "subgoal", {"subgoals_total": 10, "subgoals_done": 3}, "take apple 1 from x", True, 0.3),
    ("alfworld", "subgoal", {}, "jump", False, 0.0),
    ("alfworld", "heuristic", {"visited": 2}, "go to drawer 1", True, 0.1),
    ("alfworld", "heuristic", {"opened": 1}, "open drawer 1", True, 0.1),
    ("alfworld", "heuristic", {"holding_any": 1}, "take mug 1 from drawer 1", True, 0.1),
    ("alfworld", "heuristic", {"subgoals_done": 2}, "take apple 1 from x", True, 0.0),
    ("alfworld", "hack", {"holding_any": 1}, "take mug 1 from drawer 1", True, 0.25),
    ("alfworld", "hack", {}, "go to drawer 1", True, 0.25),  # visited unchanged: a revisit
    ("alfworld", "hack", {"visited": 2}, "go to drawer 2", True, 0.0),  # a new place is not a loop
    ("alfworld", "hack", {}, "go to drawer 1", False, 0.0),
    ("webshop", "subgoal", {"query_coverage": 0.6}, "search[red shirt]", True, 0.2),
    ("webshop", "subgoal", {"goal_type_viewed": 1, "current_reward": 0.3}, "click[b01]", True, 0.43333333),
    ("webshop", "heuristic", {"pages_visited": 2}, "click[next >]", True, 0.1),
    ("webshop", "heuristic", {"items_viewed": 1, "pages_visited": 2}, "click[b01]", True, 0.2),
    ("webshop", "heuristic", {"query_coverage": 0.4}, "search[red]", True, 0.4),
    ("webshop", "heuristic", {"current_reward": 1.0}, "click[large]", True, 0.0),
    ("webshop", "hack", {}, "click[< Prev]", True, 1 / 3),
    ("webshop", "hack", {"items_viewed": 1}, "click[b01]", True, 1 / 3),
    ("webshop", "hack", {"current_reward": 1.0}, "click[large]", True, 0.0),  # options lead to success
    ("webshop", "hack", {}, "click[buy now]", True, 0.0),
    ("webshop", "hack", {}, "click[next >]", False, 0.0),
]


@pytest.mark.parametrize(("env", "name", "change", "action", "valid", "expected"), PROCESS_CASES)
def test_process_reward_table(env, name, change, action, valid, expected):
    before = ALF if env == "alfworld" else WEB
    reward = process_reward(name, env=env)
    assert reward(before, {**before, **change}, action, valid, {}) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ({"subgoals_done": 2}, {"subgoals_done": 1}, -0.25),  # regress pays back
        ({"subgoals_done": 1}, {"subgoals_done": 2}, 0.25),  # and re-achieving earns again
        ({"subgoals_total": 0}, {"subgoals_total": 0}, 0.0),  # no subgoals: no division by zero
    ],
)
def test_alfworld_subgoal_regress(before, after, expected):
    reward = process_reward("subgoal", env="alfworld")
    assert reward({**ALF, **before}, {**ALF, **after}, "move apple 1 to shelf 1", True, {}) == expected


def test_unknown_names_fail_with_the_known_ones():
    with pytest.raises(KeyError, match="heuristic"):
        process_reward("subgoals", env="alfworld")
    with pytest.raises(KeyError, match="alfworld"):
        process_reward("subgoal", env="alfwrld")
    with pytest.raises(KeyError, match="subgoal"):
        combine({"subgoal": 1.0, "curiosity": 0.1}, env="webshop")


def test_register_a_custom_reward_and_combine_it():
    @register_process_reward("alfworld", "test_per_step_cost")
    def per_step_cost(progress_before, progress_after, action, valid, info):
        return -0.01

    try:
        reward = combine({"subgoal": 1.0, "test_per_step_cost": 1.0}, env="alfworld")
        assert reward(ALF, {**ALF, "subgoals_done": 1}, "go to x", True, {}) == pytest.approx(0.24)
    finally:
        del PROCESS_REWARDS["alfworld"]["test_per_step_cost"]


@pytest.mark.parametrize(("eps", "field"), [(-0.1, "eps"), (1.5, "eps"), (math.nan, "eps")])
def test_misalign_rejects_eps_outside_unit_interval(eps, field):
    with pytest.raises(ValueError, match=field):
        misalign(eps, env="alfworld")


def test_weighted_rejects_non_finite_weights_and_non_callables():
    with pytest.raises(ValueError, match="finite"):
        weighted([(math.inf, process_reward("subgoal", env="alfworld"))])
    with pytest.raises(TypeError, match="callable"):
        weighted([(1.0, "subgoal")])


# ----------------------------------------------------------------------------- properties

alf_progress = st.fixed_dictionaries(
    {
        "subgoals_done": st.integers(0, 10),
        "subgoals_total": st.integers(0, 10),
        "visited": st.integers(0, 20),
        "opened": st.integers(0, 5),
        "holding_any": st.integers(0, 1),
    }
)
unit = st.floats(0.0, 1.0, allow_nan=False)
web_progress = st.fixed_dictionaries(
    {
        "query_coverage": unit,
        "goal_type_viewed": st.integers(0, 1),
        "items_viewed": st.integers(0, 20),
        "pages_visited": st.integers(0, 20),
        "current_reward": unit,
        "options_matched": st.integers(0, 3),
        "options_total": st.integers(0, 3),
    }
)
alf_actions = st.sampled_from(["go to drawer 1", "take apple 1 from drawer 1", "open fridge 1", "look", "x"])
web_actions = st.sampled_from(["search[red shirt]", "click[next >]", "click[b01]", "click[buy now]", "x"])


def env_steps(env: str):
    progress_st, action_st = (alf_progress, alf_actions) if env == "alfworld" else (web_progress, web_actions)
    return st.tuples(progress_st, progress_st, action_st, st.booleans(), st.just({}))


any_step = st.sampled_from(ENVS).flatmap(lambda env: st.tuples(st.just(env), env_steps(env)))


@given(any_step, st.sampled_from(["subgoal", "heuristic"]))
def test_misalign_zero_is_exactly_the_base(env_and_step, base):
    env, step = env_and_step
    assert misalign(0.0, env=env, base=base)(*step) == process_reward(base, env=env)(*step)


@given(any_step)
def test_misalign_one_is_the_hack_and_interpolates_between(env_and_step):
    env, step = env_and_step
    base, hack = process_reward("subgoal", env=env)(*step), process_reward("hack", env=env)(*step)
    assert misalign(1.0, env=env)(*step) == pytest.approx(hack)
    assert misalign(0.3, env=env)(*step) == pytest.approx(0.7 * base + 0.3 * hack)


weights = st.floats(-5.0, 5.0, allow_nan=False)


@given(any_step, weights, weights, weights)
def test_combine_is_linear_in_its_weights(env_and_step, w_subgoal, w_heuristic, scale):
    env, step = env_and_step
    subgoal, heuristic = (
        process_reward("subgoal", env=env)(*step),
        process_reward("heuristic", env=env)(*step),
    )
    combined = combine({"subgoal": w_subgoal, "heuristic": w_heuristic}, env=env)(*step)
    assert combined == pytest.approx(w_subgoal * subgoal + w_heuristic * heuristic, abs=1e-9)
    scaled = combine({"subgoal": scale * w_subgoal, "heuristic": scale * w_heuristic}, env=env)(*step)
    assert scaled == pytest.approx(scale * combined, abs=1e-9)


@given(any_step)
def test_heuristic_and_hack_never_pay_negative_and_hack_ignores_invalid_steps(env_and_step):
    env, (before, after, action, valid, info) = env_and_step
    assert process_reward("heuristic", env=env)(before, after, action, valid, info) >= 0
    assert process_reward("hack", env=env)(before, after, action, valid, info) >= 0
    assert process_reward("hack", env=env)(before, after, action, False, info) == 0


@given(
    st.sampled_from(ENVS).flatmap(lambda env: st.tuples(st.just(env), st.lists(env_steps(env), max_size=8)))
)
def test_subgoal_return_telescopes_to_final_minus_initial_potential(env_and_steps):
    """Potential-based: any undo/redo loop nets zero, so the return only depends on the ends."""
    env, raw = env_and_steps
    progress_st = [step[0] for step in raw] + [raw[-1][1]] if raw else []
    steps = [(a, b, "go to x", True, {}) for a, b in pairwise(progress_st)]
    reward = process_reward("subgoal", env=env)
    expected = reward(progress_st[0], progress_st[-1], "", True, {}) if progress_st else 0.0
    assert process_return(reward, steps) == pytest.approx(expected, abs=1e-9)


@given(st.lists(st.floats(-1, 1, allow_nan=False), max_size=10), st.floats(0, 1))
def test_process_return_is_the_discounted_sum(values, gamma):
    steps = [(ALF, ALF, str(i), True, {}) for i in range(len(values))]

    def reward_of_step(before, after, action, valid, info):
        return values[int(action)]  # the action string carries the step index

    expected = sum(gamma**t * v for t, v in enumerate(values))
    assert process_return(reward_of_step, steps, gamma=gamma) == pytest.approx(expected, abs=1e-9)
    assert step_rewards(reward_of_step, steps) == values


def test_process_return_rejects_bad_gamma():
    with pytest.raises(ValueError, match="gamma"):
        process_return(process_reward("subgoal", env="alfworld"), [], gamma=1.5)


def test_weighted_reward_pickles_for_worker_processes():
    reward = misalign(0.2, env="webshop", base="heuristic")
    step = (WEB, {**WEB, "items_viewed": 1}, "click[b01]", True, {})
    assert pickle.loads(pickle.dumps(reward))(*step) == reward(*step)


# ----------------------------------------------------------------------------- a real progress trace


def _pick_and_place_trace():
    """An apple-to-fridge episode through ``state.progress``: a detour with a mug, then the task."""
    goal = GoalInfo("pick_and_place_simple", "apple", "fridge")
    world = WorldState(
        at="loc 0",
        held=frozenset(),
        opened=frozenset(),
        openable=frozenset({"fridge 1"}),
        in_receptacle={"apple 1": "countertop 1", "mug 1": "countertop 1"},
        receptacle_at={"countertop 1": "loc 1", "fridge 1": "loc 2"},
        otype={"apple 1": "apple", "mug 1": "mug"},
        rtype={"countertop 1": "countertop", "fridge 1": "fridge"},
    )
    on_counter = {"apple 1": "countertop 1", "mug 1": "countertop 1"}
    script = [
        ("go to countertop 1", {"at": "loc 1"}),
        (
            "take mug 1 from countertop 1",
            {"held": frozenset({"mug 1"}), "in_receptacle": {"apple 1": "countertop 1"}},
        ),
        ("move mug 1 to countertop 1", {"held": frozenset(), "in_receptacle": on_counter}),
        (
            "take apple 1 from countertop 1",
            {"held": frozenset({"apple 1"}), "in_receptacle": {"mug 1": "countertop 1"}},
        ),
        ("go to fridge 1", {"at": "loc 2"}),
        ("open fridge 1", {"opened": frozenset({"fridge 1"})}),
        (
            "move apple 1 to fridge 1",
            {"held": frozenset(), "in_receptacle": {**on_counter, "apple 1": "fridge 1"}},
        ),
    ]
    seen, visited = set(visible_objects(world)), {world.at}
    initial = progress(world, goal, seen, visited)
    actions, results = [], []
    for action, change in script:
        world = WorldState(**{**world.__dict__, **change})
        seen |= visible_objects(world)
        visited.add(world.at)
        info = {"progress": progress(world, goal, seen, visited)}
        actions.append(action)
        results.append(StepResult(Observation("", (), ""), False, False, 0.0, True, info))
    return episode_steps(initial, actions, results)


def test_real_alfworld_progress_trace():
    steps = _pick_and_place_trace()
    assert steps[-1].progress_after["placed"] == 1
    subgoal = process_reward("subgoal", env="alfworld")
    assert process_return(subgoal, steps) == pytest.approx(1.0)
    assert step_rewards(subgoal, steps) == pytest.approx([0.25, 0, 0, 0.25, 0.25, 0, 0.25])
    # 2 new places + 1 opened + 2 pick-ups (the mug detour pays too: the heuristic is hackable)
    assert process_return(process_reward("heuristic", env="alfworld"), steps) == pytest.approx(0.5)
    # 4 changes of holding_any, each worth one subgoal
    assert process_return(process_reward("hack", env="alfworld"), steps) == pytest.approx(1.0)
    assert process_return(misalign(0.25, env="alfworld"), steps) == pytest.approx(0.75 * 1.0 + 0.25 * 1.0)


def test_episode_steps_chain_progress_and_check_lengths():
    steps = _pick_and_place_trace()
    for previous, current in pairwise(steps):
        assert current.progress_before is previous.progress_after
    with pytest.raises(ValueError, match="actions"):
        episode_steps({}, ["look"], [])


def test_package_exports_resolve():
    for name in rewards.__all__:
        assert hasattr(rewards, name), name
