"""Learned PRM: AUC against a pair-count reference, fitting on synthetic data, shaping, save/load, registry."""

from __future__ import annotations

import doctest
import json
import math
import pickle
import random
from dataclasses import dataclass, field

import pytest
import torch

from rspo_kit.rewards import (
    PROCESS_REWARDS,
    LearnedPRM,
    PRMConfig,
    ShapedPRM,
    combine,
    evaluate_prm,
    fit_prm,
    process_return,
    process_reward,
    register_learned,
    roc_auc,
)
from rspo_kit.rewards import learned as learned_module

torch.set_num_threads(1)


@dataclass
class FakeStep:
    progress_before: dict
    progress_after: dict
    action: str = "act"
    valid: bool = True
    info: dict = field(default_factory=dict)


@dataclass
class FakeTrajectory:
    task_id: str
    steps: list[FakeStep]
    won: bool


def synthetic(n: int, seed: int, *, shuffle_labels: bool = False) -> list[FakeTrajectory]:
    """Episodes of 3–7 steps whose success (skill > 0.5, 10% of labels flipped) shows in ``rate``.

    ``rate`` is a noisy running estimate of the hidden skill; ``noise`` and ``flag`` are irrelevant
    keys; the first step starts from the empty progress mapping.
    """
    rng = random.Random(seed)
    trajectories = []
    for i in range(n):
        skill = rng.random()
        won = (skill > 0.5) != (rng.random() < 0.1)
        before: dict = {}
        steps, total = [], 0.0
        for t in range(1, rng.randint(3, 7) + 1):
            total += skill + rng.gauss(0.0, 0.2)
            after = {"rate": total / t, "noise": rng.random(), "flag": rng.random() < 0.5}
            steps.append(FakeStep(before, after))
            before = after
        trajectories.append(FakeTrajectory(f"task{i}", steps, won))
    if shuffle_labels:
        outcomes = [t.won for t in trajectories]
        rng.shuffle(outcomes)
        for t, won in zip(trajectories, outcomes, strict=True):
            t.won = won
    return trajectories


FAST = PRMConfig(hidden=16, epochs=150, lr=3e-2)


@pytest.fixture(scope="module")
def fitted() -> LearnedPRM:
    return fit_prm(synthetic(300, seed=1), FAST)


# ----------------------------------------------------------------------------- roc_auc


def slow_auc(scores, labels) -> float:
    """O(n²) reference: the share of (positive, negative) pairs ranked right, ties counting ½."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(20))
def test_roc_auc_matches_pair_count_reference(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 60)
    # few distinct values, so that ties within and across classes are common
    scores = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) if seed % 2 else rng.random() for _ in range(n)]
    labels = [rng.random() < 0.4 for _ in range(n)]
    labels[0], labels[1] = True, False  # both classes present
    assert roc_auc(scores, labels) == pytest.approx(slow_auc(scores, labels), abs=1e-12)
    assert roc_auc(torch.tensor(scores), torch.tensor(labels)) == pytest.approx(slow_auc(scores, labels))


@pytest.mark.parametrize(
    ("scores", "labels", "expected"),
    [
        ([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], 1.0),  # perfect ranking
        ([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1], 0.0),  # reversed
        ([0.3, 0.3, 0.3, 0.3], [0, 1, 0, 1], 0.5),  # all tied
        ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], 0.75),
        ([1, 2, 3], [True, False, True], 0.5),
    ],
)
def test_roc_auc_known_values(scores, labels, expected):
    assert roc_auc(scores, labels) == expected


def test_roc_auc_edge_cases():
    assert math.isnan(roc_auc([0.1, 0.2], [1, 1]))  # one class only: undefined
    assert math.isnan(roc_auc([], []))
    with pytest.raises(ValueError, match="scores but"):
        roc_auc([0.1, 0.2], [1])
    with pytest.raises(ValueError, match="0/1"):
        roc_auc([0.1, 0.2], [2, 0])
    with pytest.raises(ValueError, match="NaN"):
        roc_auc([math.nan, 0.2], [1, 0])


# ----------------------------------------------------------------------------- fitting


def test_fitted_prm_predicts_success_on_held_out_trajectories(fitted):
    report = evaluate_prm(fitted, synthetic(200, seed=2))
    assert report["step_auc"] > 0.8
    assert report["early_auc"] > 0.8
    assert report["n_trajectories"] == 200
    assert fitted.keys == ("flag", "noise", "rate")


def test_shuffled_labels_give_chance_auc():
    prm = fit_prm(synthetic(300, seed=1, shuffle_labels=True), FAST)
    report = evaluate_prm(prm, synthetic(200, seed=2, shuffle_labels=True))
    assert abs(report["step_auc"] - 0.5) < 0.1
    assert abs(report["early_auc"] - 0.5) < 0.12


def test_logistic_regression_fits_too():
    prm = fit_prm(synthetic(300, seed=1), PRMConfig(hidden=0, epochs=150, lr=0.1))
    assert evaluate_prm(prm, synthetic(200, seed=2))["step_auc"] > 0.8


def test_fit_is_deterministic_and_leaves_global_rng_alone(fitted):
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    again = fit_prm(synthetic(300, seed=1), FAST)
    assert torch.equal(torch.rand(3), expected_next)
    states = [t.steps[-1].progress_after for t in synthetic(20, seed=3)]
    assert torch.equal(again.phi_batch(states), fitted.phi_batch(states))
    other_seed = fit_prm(synthetic(300, seed=1), PRMConfig(hidden=16, epochs=150, lr=3e-2, seed=1))
    assert not torch.equal(other_seed.phi_batch(states), fitted.phi_batch(states))


def test_phi_reads_any_progress_mapping(fitted):
    assert 0.0 < fitted.phi({}) < 1.0  # the state before the first step
    assert fitted.phi({}) == fitted.phi({"rate": 0, "noise": 0, "flag": False})  # missing keys read 0
    assert fitted.phi({"rate": 0.7, "unknown": 7}) == fitted.phi({"rate": 0.7})  # unknown keys ignored
    assert fitted.phi({"flag": True}) == fitted.phi({"flag": 1})
    batch = fitted.phi_batch([{}, {"rate": 0.9}])
    assert batch.shape == (2,)
    assert batch[1] > 0.5 > batch[0]  # the skilled succeed
    with pytest.raises(TypeError, match="rate='high'"):
        fitted.phi({"rate": "high"})


def test_fit_rejects_empty_data():
    with pytest.raises(ValueError, match="at least one step"):
        fit_prm([FakeTrajectory("t", [], True)])
    with pytest.raises(ValueError, match="no progress keys"):
        fit_prm([FakeTrajectory("t", [FakeStep({}, {})], True)])


# ----------------------------------------------------------------------------- shaping


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_shaped_reward_telescopes(fitted, gamma):
    reward = fitted.shaped(gamma)
    for trajectory in synthetic(10, seed=4):
        steps = [(s.progress_before, s.progress_after, s.action, s.valid, s.info) for s in trajectory.steps]
        first, last = trajectory.steps[0].progress_before, trajectory.steps[-1].progress_after
        expected = gamma ** len(steps) * fitted.phi(last) - fitted.phi(first)
        assert process_return(reward, steps, gamma=gamma) == pytest.approx(expected, abs=1e-6)


def test_shaped_reward_values(fitted):
    state = {"rate": 0.6}
    assert fitted.shaped()(state, state, "look", True, {}) == 0.0
    assert fitted.shaped(0.5)(state, state, "look", True, {}) == pytest.approx(-0.5 * fitted.phi(state))
    assert fitted.shaped().gamma == fitted.config.gamma
    with pytest.raises(ValueError, match="gamma"):
        ShapedPRM(fitted, 1.5)


def test_shaped_reward_pickles_into_workers(fitted):
    reward = fitted.shaped(0.9)
    step = ({"rate": 0.3}, {"rate": 0.7}, "act", True, {})
    assert pickle.loads(pickle.dumps(reward))(*step) == reward(*step)


def test_register_learned_reaches_process_reward_and_combine(fitted, monkeypatch):
    monkeypatch.setitem(PROCESS_REWARDS, "alfworld", dict(PROCESS_REWARDS["alfworld"]))  # undone after
    reward = register_learned(fitted, "alfworld")
    assert process_reward("learned", env="alfworld") is reward
    before = {"subgoals_done": 0, "subgoals_total": 4, "rate": 0.2}
    after = {"subgoals_done": 1, "subgoals_total": 4, "rate": 0.8}
    mixed = combine({"learned": 1.0, "subgoal": 0.5}, env="alfworld")
    assert mixed(before, after, "go to x", True, {}) == pytest.approx(
        reward(before, after, "go to x", True, {}) + 0.125
    )
    replaced = register_learned(fitted, "alfworld", gamma=0.5)  # re-registering replaces
    assert process_reward("learned", env="alfworld") is replaced


# ----------------------------------------------------------------------------- save / load, config


def test_save_load_round_trip(fitted, tmp_path):
    folder = fitted.save(tmp_path / "prm")
    assert sorted(p.name for p in folder.iterdir()) == ["prm.json", "prm.safetensors"]
    loaded = LearnedPRM.load(folder)
    assert loaded.keys == fitted.keys
    assert loaded.config == fitted.config
    states = [{}, *(s.progress_after for t in synthetic(10, seed=5) for s in t.steps)]
    assert torch.equal(loaded.phi_batch(states), fitted.phi_batch(states))
    meta = json.loads((folder / "prm.json").read_text())
    (folder / "prm.json").write_text(json.dumps({**meta, "format": "something else"}))
    with pytest.raises(ValueError, match="format"):
        LearnedPRM.load(folder)


@pytest.mark.parametrize(
    ("field_name", "value"),
    [
        ("hidden", -1),
        ("epochs", 0),
        ("lr", 0.0),
        ("lr", math.inf),
        ("weight_decay", -1e-4),
        ("gamma", 1.5),
        ("pos_weight", 0.0),
    ],
)
def test_config_validation_names_the_field(field_name, value):
    with pytest.raises(ValueError, match=f"PRMConfig.{field_name}"):
        PRMConfig(**{field_name: value})


def test_pos_weight_raises_predicted_success():
    data = synthetic(300, seed=1)
    plain = fit_prm(data, FAST)
    weighted = fit_prm(data, PRMConfig(hidden=16, epochs=150, lr=3e-2, pos_weight=4.0))
    assert weighted.phi({"rate": 0.5}) > plain.phi({"rate": 0.5})


# ----------------------------------------------------------------------------- evaluation


class ReadX:
    """A scorer whose Φ is the progress key ``x``: lets the tests pick which states get compared."""

    def phi_batch(self, progresses):
        return torch.tensor([float(p.get("x", 0.0)) for p in progresses])


def episode(xs: list[float], won: bool) -> FakeTrajectory:
    return FakeTrajectory("t", [FakeStep({}, {"x": x}) for x in xs], won)


def test_evaluate_prm_compares_the_right_states():
    # x is high at the midpoint of wins and at step 2 of losses only: early_auc sees midpoints,
    # step_k_auc with k = 2 sees the second step of episodes longer than two steps.
    data = [
        episode([0, 0, 9, 0], True),  # midpoint of 4 steps: step 2
        episode([0, 0, 9, 0, 0, 0], True),  # midpoint of 6 steps: step 3
        episode([0, 5, 0, 0], False),
        episode([0, 5, 0, 0, 0, 0], False),
        episode([0, 0], False),  # not running after k = 2 steps
    ]
    report = evaluate_prm(ReadX(), data, early_fraction=0.5, early_steps=2)
    assert report["early_auc"] == pytest.approx(slow_auc([0, 9, 5, 0, 0], [1, 1, 0, 0, 0]))
    assert report["step_k_auc"] == 0.0  # x after step 2: wins 0, losses 5
    assert report["n_running_at_k"] == 4
    assert report["n_steps"] == 22
    assert report["success_rate"] == pytest.approx(0.4)
    assert math.isnan(evaluate_prm(ReadX(), data, early_steps=10)["step_k_auc"])
    with pytest.raises(ValueError, match="early_fraction"):
        evaluate_prm(ReadX(), data, early_fraction=0.0)


# ----------------------------------------------------------------------------- logged behaviour, CLI


def test_split_by_task_keeps_tasks_apart():
    logged = [FakeTrajectory(f"task{i % 40}", [], i % 3 == 0) for i in range(120)]
    train, test = learned_module.split_by_task(logged, held_out=0.25, seed=0)
    assert len(train) + len(test) == 120
    assert len({t.task_id for t in test}) == 10
    assert not {t.task_id for t in train} & {t.task_id for t in test}


def test_collect_behaviour_logs_noisy_expert_episodes():
    logged = learned_module.collect_behaviour("alfworld", 6, p_range=(0.5, 1.0), progress_bar=False)
    again = learned_module.collect_behaviour("alfworld", 6, p_range=(0.5, 1.0), progress_bar=False)
    assert logged == again  # seeded per episode
    assert all(0.5 <= t.expert_p <= 1.0 for t in logged)
    assert len({t.task_id for t in logged}) == 6
    for t in logged:
        assert 1 <= len(t.steps) <= 50  # ALFWorld's default cap
        assert t.steps[0].progress_before["subgoals_done"] == 0
        for previous, step in zip(t.steps, t.steps[1:], strict=False):
            assert step.progress_before == previous.progress_after


def test_cli_writes_report_and_model(tmp_path):
    out = tmp_path / "prm_webshop"
    argv = ["--env", "webshop", "--episodes", "40", "--epochs", "30", "--out", str(out)]
    report = learned_module.main(argv)
    assert json.loads((out / "report.json").read_text()) == json.loads(json.dumps(report))
    assert report["train"]["n_trajectories"] == 30 and report["held_out"]["n_trajectories"] == 10
    assert 0.0 < report["behaviour"]["success_rate"] < 1.0
    assert LearnedPRM.load(out / "prm").keys == tuple(report["keys"])


def test_module_doctests_pass():
    result = doctest.testmod(learned_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
