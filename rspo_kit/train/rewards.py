"""The rewards a run is scored with: its outcome reward and its process reward (``reward.*``).

``run_rewards(cfg)`` is the run's ``RewardModel``; ``reward_model`` builds one with another process
reward in place of ``reward.process`` (the generic ``progress`` reward of a run that trains on the
outcome alone, in an env without the configured one).
"""

from __future__ import annotations

import warnings

from rspo_kit.rewards.outcome import OutcomeConfig
from rspo_kit.rewards.process import GENERIC_REWARD
from rspo_kit.rewards.progress_model import auto_process_reward
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.train.config import RunConfig, process_reward_use


def reward_model(cfg: RunConfig, process: str | None = None) -> RewardModel:
    """The run's rewards; ``process`` replaces ``reward.process`` and its misalignment knob."""
    r = cfg.reward
    outcome = OutcomeConfig(r.outcome_mode, r.invalid_penalty)
    if process is not None:
        return RewardModel.build(cfg.env.name, outcome, process, 0.0, r.mix_lambda)
    name = (
        auto_process_reward(cfg.env.name, cfg.swap.mode, r.misalign_eps) if r.process == "auto" else r.process
    )
    return RewardModel.build(cfg.env.name, outcome, name, r.misalign_eps, r.mix_lambda, r.hack)


def run_rewards(cfg: RunConfig) -> RewardModel:
    """The rewards a run of ``cfg`` is scored with (``reward_model``); a run that trains on the outcome alone (``process_reward_use`` None) in an env
    without ``reward.process`` gets the generic ``progress`` reward, which only its metrics read
    (``*/process_return``, ``swap/process_outcome_tau``, the turn table), with a warning saying so."""
    try:
        return reward_model(cfg)
    except KeyError as err:
        if process_reward_use(cfg) is not None:
            raise
        missing = err.args[0].partition(";")[0]
    warnings.warn(
        f"{missing}: this run trains on the outcome alone, and its process metrics read the generic "
        f"{GENERIC_REWARD!r} reward",
        stacklevel=3,
    )
    return reward_model(cfg, GENERIC_REWARD)
