"""Scene generator and split manifests: determinism, coverage, and splits that never overlap."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rspo_kit.envs import list_tasks
from rspo_kit.envs.alfworld import splits
from rspo_kit.envs.alfworld.scenes import (
    TASK_ROOMS,
    TASK_TYPES,
    SceneKnobs,
    TaskSpec,
    game_json,
    generate_scene,
    mangle,
    write_game,
)


def _spec(task_type="pick_and_place_simple", room=None, **kw):
    return TaskSpec(
        id="t/0", task_type=task_type, room=room or TASK_ROOMS[task_type][0], layout=3, seed=11, **kw
    )


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_same_spec_gives_byte_identical_games(task_type, tmp_path):
    a = write_game(_spec(task_type), tmp_path / "a")
    b = write_game(_spec(task_type), tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    assert (a.parent / "traj_data.json").read_bytes() == (b.parent / "traj_data.json").read_bytes()


def test_different_seeds_give_different_scenes():
    base = _spec()
    other = TaskSpec(**{**base.to_dict(), "seed": 12, "knobs": base.knobs})
    assert game_json(generate_scene(base)) != game_json(generate_scene(other))


def test_game_file_carries_task_text_in_grammar():
    scene = generate_scene(_spec("pick_heat_then_place_in_recep"))
    game = game_json(scene)
    assert "UNKNOWN GOAL" not in game["grammar"]
    assert f"Your task is to: {scene.task_text}." in game["grammar"]
    assert game["solvable"] is True
    assert "(:goal" in game["pddl_problem"] and "isHot" in game["pddl_problem"]


def test_knobs_shape_the_scene():
    small = generate_scene(
        _spec(knobs=SceneKnobs(n_receptacles=(4, 4), n_distractors=(0, 0), n_targets=(1, 1)))
    )
    big = generate_scene(_spec(knobs=SceneKnobs(n_receptacles=(14, 14), n_distractors=(12, 12))))
    assert len(small.items) == 1  # only the target
    assert len(big.items) > 12
    assert len(big.receptacles) > len(small.receptacles)
    open_scene = generate_scene(_spec("pick_heat_then_place_in_recep", knobs=SceneKnobs(closed_fraction=0.0)))
    assert all(r.opened for r in open_scene.receptacles if r.openable)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_receptacles": (5, 2)}, "n_receptacles"),
        ({"n_receptacles": (1, 2)}, "at least 3"),
        ({"closed_fraction": 1.5}, "closed_fraction"),
        ({"n_targets": (0, 1)}, "n_targets"),
    ],
)
def test_bad_knobs_are_rejected_with_the_field_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SceneKnobs(**kwargs)


def test_bad_spec_is_rejected():
    with pytest.raises(ValueError, match="task_type"):
        TaskSpec(id="x", task_type="make_coffee", room="kitchen", layout=0, seed=0)
    with pytest.raises(ValueError, match="room"):
        TaskSpec(id="x", task_type="pick_heat_then_place_in_recep", room="bathroom", layout=0, seed=0)


def test_mangling_matches_alfred():
    assert mangle("Sink|-01.23|+00.90|+02.10|SinkBasin") == (
        "Sink_bar__minus_01_dot_23_bar__plus_00_dot_90_bar__plus_02_dot_10_bar_SinkBasin"
    )


def test_split_sizes_and_type_balance():
    for split, per_type in (("train", 500), ("eval", 20), ("eval_unseen", 20)):
        tasks = list_tasks("alfworld", split=split)
        assert len(tasks) == 6 * per_type
        assert Counter(t.kind for t in tasks) == {t: per_type for t in TASK_TYPES}
        assert len({t.id for t in tasks}) == len(tasks)
    assert {t.kind for t in list_tasks("alfworld", split="eval", n=6)} == set(TASK_TYPES)


def test_splits_do_not_overlap():
    def keys(split):
        return {
            (t.meta["spec"]["room"], t.meta["spec"]["layout"]) for t in list_tasks("alfworld", split=split)
        }

    train = list_tasks("alfworld", split="train")
    evals = list_tasks("alfworld", split="eval")
    train_scenes = {json.dumps(t.meta["spec"] | {"id": ""}, sort_keys=True) for t in train}
    assert not train_scenes & {json.dumps(t.meta["spec"] | {"id": ""}, sort_keys=True) for t in evals}
    assert not keys("train") & keys("eval_unseen")  # unseen layouts are never trained on
    assert {layout for _, layout in keys("eval")} <= set(splits.SEEN_LAYOUTS)


@pytest.mark.parametrize("split", ["eval", "eval_unseen"])
def test_committed_manifests_are_reproducible(split):
    assert splits.build_manifest(split) == json.loads(splits.manifest_path(split).read_text())


def test_list_tasks_rejects_bad_input():
    with pytest.raises(ValueError, match="split"):
        list_tasks("alfworld", split="test")
    with pytest.raises(ValueError, match="n must be"):
        list_tasks("alfworld", split="eval", n=-1)
    with pytest.raises(KeyError, match="unknown env"):
        list_tasks("nethack")
