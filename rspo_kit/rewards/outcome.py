"""Outcome reward R_o(τ): what the environment says about the whole episode, as one float.

ALFWorld pays 1.0 on success and 0 otherwise. WebShop pays success (the bought product scored
reward 1.0) or, in ``"score"`` mode, the raw score / 100 in [0, 1]. Either can subtract an
invalid-action penalty per invalid step, as verl-agent does (0.1 there; off by default here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

OutcomeMode = Literal["success", "score"]
OUTCOME_MODES: tuple[str, ...] = get_args(OutcomeMode)

# Divisor that maps an env's ``StepResult.score`` to [0, 1] in "score" mode. ALFWorld's score is
# already 0/1, WebShop's is 100 * reward. Other envs add theirs with ``register_score_scale``.
SCORE_SCALE: dict[str, float] = {"alfworld": 1.0, "webshop": 100.0}


def register_score_scale(env: str, scale: float) -> None:
    """Let ``mode="score"`` work for ``env``: its outcome becomes ``score / scale``."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    SCORE_SCALE[env] = float(scale)


def _check(mode: str, invalid_penalty: float) -> None:
    if mode not in OUTCOME_MODES:
        raise ValueError(f"mode must be one of {OUTCOME_MODES}, got {mode!r}")
    if not (math.isfinite(invalid_penalty) and invalid_penalty >= 0):
        raise ValueError(f"invalid_penalty must be a finite number >= 0, got {invalid_penalty!r}")


def outcome_reward(
    won: bool,
    score: float,
    n_invalid: int = 0,
    *,
    env: str,
    mode: OutcomeMode = "success",
    invalid_penalty: float = 0.0,
) -> float:
    """R_o = base − invalid_penalty · n_invalid, base = 1[won] ("success") or score / scale ("score").

    The penalty is not floored: a failed episode full of invalid steps goes below 0, which is what
    makes the penalty bite when every trajectory of a group fails. "success" mode reads only ``won``,
    so it works for any env; "score" mode needs the env's score scale (``SCORE_SCALE``).

    >>> outcome_reward(True, 1.0, env="alfworld")
    1.0
    >>> outcome_reward(False, 75.0, env="webshop", mode="score")
    0.75
    >>> round(outcome_reward(True, 100.0, 3, env="webshop", invalid_penalty=0.1), 6)
    0.7
    """
    _check(mode, invalid_penalty)
    if n_invalid < 0:
        raise ValueError(f"n_invalid must be >= 0, got {n_invalid!r}")
    if mode == "success":
        base = 1.0 if won else 0.0
    else:
        if env not in SCORE_SCALE:
            raise ValueError(
                f"mode='score' needs a score scale for env {env!r}; known: {sorted(SCORE_SCALE)} "
                "(add one with register_score_scale)"
            )
        base = float(score) / SCORE_SCALE[env]
    return base - invalid_penalty * n_invalid


@dataclass(frozen=True)
class OutcomeConfig:
    """How a run turns an episode's end into R_o; ``reward`` applies it.

    ``invalid_penalty`` is per invalid step; verl-agent uses 0.1.
    """

    mode: OutcomeMode = "success"
    invalid_penalty: float = 0.0

    def __post_init__(self) -> None:
        _check(self.mode, self.invalid_penalty)

    def reward(self, won: bool, score: float, n_invalid: int = 0, *, env: str) -> float:
        """R_o of one episode under this config.

        >>> OutcomeConfig(mode="score").reward(False, 40.0, env="webshop")
        0.4
        """
        return outcome_reward(
            won, score, n_invalid, env=env, mode=self.mode, invalid_penalty=self.invalid_penalty
        )
