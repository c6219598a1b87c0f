"""Outcome reward R_o: per-env table, penalty, and config validation."""

from __future__ import annotations

import pytest

from rspo_kit.rewards import OutcomeConfig, outcome_reward, register_score_scale
from rspo_kit.rewards.outcome import SCORE_SCALE

CASES = [
    # won, score, n_invalid, env, mode, invalid_penalty, expected
    (True, 1.0, 0, "alfworld", "success", 0.0, 1.0),
    (False, 0.0, 0, "alfworld", "success", 0.0, 0.0),
    (True, 1.0, 0, "alfworld", "score", 0.0, 1.0),
    (False, 0.0, 4, "alfworld", "success", 0.1, -0.4),
    (True, 1.0, 2, "alfworld", "success", 0.1, 0.8),
    (True, 100.0, 0, "webshop", "success", 0.0, 1.0),
    (False, 75.0, 0, "webshop", "success", 0.0, 0.0),  # a partial match is not a success
    (False, 75.0, 0, "webshop", "score", 0.0, 0.75),
    (True, 100.0, 0, "webshop", "score", 0.0, 1.0),
    (False, 50.0, 3, "webshop", "score", 0.1, 0.2),
    (True, 0.0, 0, "anything", "success", 0.0, 1.0),  # success mode reads only `won`
]


@pytest.mark.parametrize(("won", "score", "n_invalid", "env", "mode", "penalty", "expected"), CASES)
def test_outcome_reward_table(won, score, n_invalid, env, mode, penalty, expected):
    got = outcome_reward(won, score, n_invalid, env=env, mode=mode, invalid_penalty=penalty)
    assert got == pytest.approx(expected)
    config = OutcomeConfig(mode=mode, invalid_penalty=penalty)
    assert config.reward(won, score, n_invalid, env=env) == got


def test_penalty_is_off_by_default():
    assert outcome_reward(True, 1.0, 30, env="alfworld") == 1.0
    assert OutcomeConfig().invalid_penalty == 0.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mode": "partial"}, "mode"),
        ({"invalid_penalty": -0.1}, "invalid_penalty"),
        ({"invalid_penalty": float("nan")}, "invalid_penalty"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        OutcomeConfig(**kwargs)
    with pytest.raises(ValueError, match=field):
        outcome_reward(True, 1.0, env="alfworld", **kwargs)


def test_mode_error_lists_allowed_values():
    with pytest.raises(ValueError, match=r"'success', 'score'"):
        OutcomeConfig(mode="partial")


def test_score_mode_needs_a_known_scale():
    with pytest.raises(ValueError, match="register_score_scale"):
        outcome_reward(False, 3.0, env="mygame", mode="score")
    register_score_scale("mygame", 10.0)
    try:
        assert outcome_reward(False, 3.0, env="mygame", mode="score") == pytest.approx(0.3)
    finally:
        SCORE_SCALE.pop("mygame")
    with pytest.raises(ValueError, match="scale"):
        register_score_scale("mygame", 0.0)


def test_negative_invalid_count_is_rejected():
    with pytest.raises(ValueError, match="n_invalid"):
        outcome_reward(True, 1.0, -1, env="alfworld")
