"""The native ALFWorld engine against the real one: transcripts, admissible sets, outcomes, rewards.

Episodes are generated scenes over all six task types and the difficulty knobs, driven by a seeded
mixture of admissible actions, expert actions and invalid strings (random casing and spacing). At every
step the two engines must agree on the observation text, the admissible commands, ``won``, ``done``,
``valid`` and ``info`` (progress, anchor). The native expert's plan must cost exactly what the real
planner's walkthrough costs (alfred.pddl's action costs: go/open/close/take/move 1, clean/heat/cool/use
5); as every optimal plan has the same number of cost-5 actions, the lengths then agree too, and both
are checked.
"""

from __future__ import annotations

import random

import pytest
from env_checks import expert_play

from rspo_kit.envs import EpisodeOverError, make_env
from rspo_kit.envs.alfworld.native import demangled_names, plan_cost
from rspo_kit.envs.alfworld.scenes import TASK_ROOMS, TASK_TYPES, SceneKnobs, TaskSpec, generate_scene
from rspo_kit.envs.base import Task

INVALID = ["fly to the moon", "", "go to", "take", "go to fridge 99", "look look", "open", "examine the sky"]
KNOBS = [
    SceneKnobs(),
    SceneKnobs(n_receptacles=(3, 5), n_distractors=(0, 2), n_targets=(1, 1), closed_fraction=0.0),
    SceneKnobs(n_receptacles=(12, 16), n_distractors=(10, 16), n_targets=(2, 4), closed_fraction=0.5),
    SceneKnobs(n_receptacles=(6, 9), n_distractors=(2, 6), n_targets=(1, 2), closed_fraction=1.0),
]


def differential_tasks(n: int, seed: int = 0) -> list[Task]:
    """``n`` buildable generated tasks cycling through the six task types and the knob presets."""
    rng, tasks = random.Random(f"native-diff-{seed}"), []
    while len(tasks) < n:
        task_type = TASK_TYPES[len(tasks) % len(TASK_TYPES)]
        knobs = KNOBS[(len(tasks) // len(TASK_TYPES)) % len(KNOBS)]
        spec = TaskSpec(
            id=f"native-diff/{seed}/{len(tasks):05d}",
            task_type=task_type,
            room=rng.choice(TASK_ROOMS[task_type]),
            layout=rng.randrange(50),
            seed=rng.randrange(10**6),
            knobs=knobs,
        )
        try:
            generate_scene(spec)
        except ValueError:  # this layout lacks what the task needs
            continue
        tasks.append(
            Task(env="alfworld", id=spec.id, split="test", kind=task_type, meta={"spec": spec.to_dict()})
        )
    return tasks


def _vary(command: str, rng: random.Random) -> str:
    words = [w.upper() if rng.random() < 0.3 else w for w in command.split()]
    sep = rng.choice([" ", "  ", "\t"])
    return rng.choice(["", " ", "\t"]) + sep.join(words) + rng.choice(["", "  ", "\n"])


def mixed_action(rng: random.Random, admissible: tuple[str, ...], native) -> str:
    """Expert actions, admissible commands (the rarer ones favoured over "go to") and invalid strings."""
    u = rng.random()
    if u < 0.45:
        return native.expert_action()
    if u < 0.65:
        return rng.choice(admissible)
    if u < 0.85:
        return rng.choice([c for c in admissible if not c.startswith("go to ")])
    return rng.choice(INVALID + list(admissible))


def curious_action(rng: random.Random, admissible: tuple[str, ...], native) -> str:
    """A player that seeks the rare paths: fetch a knife, slice, transform, examine what it holds."""

    def weight(c: str) -> float:
        verb = c.split()[0]
        if verb == "slice":
            return 100
        sliced = native._state.sliced  # once something is sliced: knife down, take the slices, examine them
        if verb == "take":
            return 40 if "knife" in c and not sliced else 30 if c.split(" from ")[0][5:] in sliced else 4
        if verb == "move" and "knife" in c and sliced:
            return 30
        return {"heat": 8, "cool": 8, "clean": 8, "go": 2, "move": 2, "examine": 4}.get(verb, 1)

    return rng.choices(admissible, weights=[weight(c) for c in admissible])[0]


def compare_episode(real, native, task: Task, seed: int, choose=mixed_action) -> int:
    """Drive both engines with the same actions; assert they agree at every step. Returns steps compared."""
    obs_r, obs_n = real.reset(task), native.reset(task)
    where = f"{task.id} ({task.kind}, seed {seed})"
    assert obs_n == obs_r, f"reset observation differs on {where}"
    assert native.info == real.info, f"reset info differs on {where}"
    walkthrough = list(real._plan)
    expert = native.expert_action()
    native_plan = list(native._plan)
    assert expert is not None
    assert plan_cost(native_plan) == plan_cost(walkthrough), (
        f"plan cost differs on {where}: {native_plan} vs {walkthrough}"
    )
    assert len(native_plan) == len(walkthrough), f"plan length differs on {where}"
    rng, steps, history = random.Random(seed), 0, []
    while not real.done:
        action = choose(rng, obs_r.admissible, native)
        if rng.random() < 0.3:
            action = _vary(action, rng)
        history.append(action)
        r, n = real.step(action), native.step(action)
        steps += 1
        ctx = f"{where}, step {steps}, actions {history}"
        assert n.obs.text == r.obs.text, (
            f"observation differs on {ctx}:\nreal:   {r.obs.text!r}\nnative: {n.obs.text!r}"
        )
        assert n.obs.admissible == r.obs.admissible, (
            f"admissible differs on {ctx}:\nonly real: {set(r.obs.admissible) - set(n.obs.admissible)}"
            f"\nonly native: {set(n.obs.admissible) - set(r.obs.admissible)}"
        )
        assert (n.won, n.done, n.valid, n.score) == (r.won, r.done, r.valid, r.score), (
            f"outcome differs on {ctx}"
        )
        assert n.info == r.info, f"info differs on {ctx}: {r.info} vs {n.info}"
        obs_r = r.obs
    assert native.done
    return steps


@pytest.fixture(scope="module")
def engines():
    real, native = make_env("alfworld", engine="alfworld"), make_env("alfworld", engine="native")
    yield real, native
    real.close()


def test_native_matches_real_engine_on_30_episodes(engines):
    real, native = engines
    tasks = differential_tasks(30, seed=0)
    assert {t.kind for t in tasks} == set(TASK_TYPES)
    steps = sum(compare_episode(real, native, task, seed=i) for i, task in enumerate(tasks))
    assert steps > 30


def test_native_matches_real_engine_on_rare_commands(engines):
    # Kitchens with a knife and something sliceable: slice (also inside closed receptacles), heat, cool,
    # clean and examine the results, which the mixed policy rarely reaches.
    real, native = engines
    tasks = [
        t
        for t in differential_tasks(120, seed=2)
        if t.kind.startswith(("pick_heat", "pick_cool", "pick_clean"))
    ]
    kitchens = []
    for task in tasks:
        otypes = {i.otype for i in generate_scene(TaskSpec.from_dict(task.meta["spec"])).items}
        if otypes & {"Knife", "ButterKnife"} and otypes & {
            "Apple",
            "Bread",
            "Lettuce",
            "Potato",
            "Tomato",
            "Egg",
        }:
            kitchens.append(task)
    assert len(kitchens) >= 4
    for i, task in enumerate(kitchens[:5]):
        compare_episode(real, native, task, seed=i, choose=curious_action)


@pytest.mark.slow
def test_native_matches_real_engine_on_1000_episodes(engines):
    # Runs every episode and reports all divergences at once: one run takes ~20 minutes.
    real, native = engines
    tasks = differential_tasks(1000, seed=1)
    steps, divergences = 0, []
    for i, task in enumerate(tasks):
        try:
            steps += compare_episode(real, native, task, seed=10_000 + i)
        except AssertionError as err:
            divergences.append(str(err)[:2000])
    print(
        f"native vs real: {len(tasks)} episodes, {steps} steps compared, {len(divergences)} divergent episodes"
    )
    assert divergences == [], "\n\n".join(divergences[:5])


def test_demangler_numbers_from_the_end_of_the_sorted_ids():
    ids = ["mug_bar__plus_1", "mug_bar__minus_2", "sink_bar__plus_3_bar_sinkbasin", "loc_bar_2", "mugtype"]
    assert demangled_names(ids) == {
        "loc_bar_2": "loc 1",
        "mug_bar__minus_2": "mug 2",  # first in sorted order, highest number (alfworld pops from the end)
        "mug_bar__plus_1": "mug 1",
        "mugtype": "mugtype ",  # no "_bar_": kept, with alfworld's trailing space
        "sink_bar__plus_3_bar_sinkbasin": "sinkbasin 1",
    }


def test_native_engine_is_chosen_by_make_env_and_keeps_the_protocol(eval_task_per_type):
    from rspo_kit.envs.alfworld.native import NativeAlfworldEnv

    env = make_env("alfworld", engine="native", max_steps=3)
    assert isinstance(env, NativeAlfworldEnv)
    env.reset(eval_task_per_type["pick_and_place_simple"])
    results = [env.step("dance") for _ in range(3)]
    assert [(r.done, r.valid, r.obs.text) for r in results] == [
        (False, False, "Nothing happens."),
        (False, False, "Nothing happens."),
        (True, False, "Nothing happens."),
    ]
    assert results[-1].info["timeout"] and not results[-1].won and results[-1].score == 0.0
    with pytest.raises(EpisodeOverError):
        env.step("look")
    assert env.expert_action() is None


@pytest.mark.parametrize("split", ["eval", "eval_unseen"])
def test_native_expert_solves_every_task_of_the_split_in_process(split):
    episodes, table = expert_play("alfworld", split, n_workers=0, engine="native")
    assert [e.task_id for e in episodes if not e.won] == []
    assert table["all"]["tasks"] == 120 and table["all"]["invalid_share"] == 0.0


def test_bad_arguments_and_official_games_are_rejected_with_a_pointer_to_the_real_engine(tmp_path):
    with pytest.raises(ValueError, match="max_steps"):
        make_env("alfworld", engine="native", max_steps=0)
    with pytest.raises(ValueError, match="engine='alfworld'"):
        make_env("alfworld", engine="native", expert="handcoded")
    game = tmp_path / "trial" / "game.tw-pddl"
    game.parent.mkdir()
    game.write_text("{}")
    (game.parent / "traj_data.json").write_text('{"task_type": "pick_and_place_simple"}')
    task = Task(env="alfworld", id="official/0", split="eval", meta={"game_file": str(game)})
    with pytest.raises(ValueError, match="engine='alfworld'"):
        make_env("alfworld", engine="native").reset(task)


def test_generated_game_files_play_natively(eval_task_per_type):
    # Games rspo_kit wrote (e.g. laid out like the official data) carry their spec in traj_data.json.
    from rspo_kit.envs.alfworld.engine import game_file

    task = eval_task_per_type["pick_heat_then_place_in_recep"]
    as_file = Task(env="alfworld", id="file/0", split="eval", meta={"game_file": str(game_file(task))})
    env = make_env("alfworld", engine="native")
    assert env.reset(as_file) == env.reset(task)
