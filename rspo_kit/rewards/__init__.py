"""Outcome rewards, process rewards and misalignment diagnostics, as pure functions.

``outcome_reward`` scores an episode; process rewards score steps and share one signature
(``ProcessReward``; ``ProgressPotential`` is the generic one of any env that counts its progress);
``combine`` and ``misalign`` compose them; ``diagnose`` shows where they disagree. The paper's learned
dense reward, a progress model on a frozen LM's states, is ``ProgressModel`` (``use_progress_model``
makes it the process reward ``"progress_model"``).
"""

from __future__ import annotations

from rspo_kit._lazy import lazy_exports, submodule_homes
from rspo_kit.rewards import alfworld, chain, webshop  # noqa: F401  (importing them registers the built-in rewards)
from rspo_kit.rewards.outcome import (
    OUTCOME_MODES,
    OutcomeConfig,
    OutcomeMode,
    outcome_reward,
    register_score_scale,
)
from rspo_kit.rewards.process import (
    GENERIC_REWARD,
    PROCESS_REWARDS,
    TRAJECTORY_REWARDS,
    NeedsTrajectory,
    ProcessReward,
    ProcessStep,
    ProgressPotential,
    TrajectoryReward,
    WeightedReward,
    combine,
    episode_steps,
    has_process_reward,
    misalign,
    process_return,
    process_reward,
    register_process_reward,
    register_trajectory_reward,
    step_rewards,
    trajectory_reward,
    weighted,
)

# diagnostics (pandas) and learned process rewards (torch) load on first use: the run config takes
# the signal names from ``rewards.signals`` without importing either.
_NAMES = {
    "diagnostics": (
        "Diagnostics",
        "HackingReport",
        "RankAgreement",
        "diagnose",
        "disagreement_by_step",
        "disagreement_table",
        "hacking_rate",
        "kendall_tau_b",
        "rank_agreement",
        "trajectory_table",
    ),
    "learned": (
        "LearnedPRM",
        "PRMConfig",
        "ShapedPRM",
        "evaluate_prm",
        "fit_prm",
        "register_learned",
        "roc_auc",
    ),
    "progress_model": (
        "FrozenEncoder",
        "HeadConfig",
        "ProgressHead",
        "ProgressModel",
        "ProgressReward",
        "committed_progress_model",
        "fit_head",
        "progress_loss",
        "train_progress_model",
        "use_progress_model",
    ),
}
_HOME = submodule_homes(__name__, _NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOME)


__all__ = [
    "GENERIC_REWARD",
    "OUTCOME_MODES",
    "PROCESS_REWARDS",
    "TRAJECTORY_REWARDS",
    "Diagnostics",
    "FrozenEncoder",
    "HackingReport",
    "HeadConfig",
    "LearnedPRM",
    "NeedsTrajectory",
    "OutcomeConfig",
    "OutcomeMode",
    "PRMConfig",
    "ProcessReward",
    "ProcessStep",
    "ProgressHead",
    "ProgressModel",
    "ProgressPotential",
    "ProgressReward",
    "RankAgreement",
    "ShapedPRM",
    "TrajectoryReward",
    "WeightedReward",
    "combine",
    "committed_progress_model",
    "diagnose",
    "disagreement_by_step",
    "disagreement_table",
    "episode_steps",
    "evaluate_prm",
    "fit_head",
    "fit_prm",
    "hacking_rate",
    "has_process_reward",
    "kendall_tau_b",
    "misalign",
    "outcome_reward",
    "process_return",
    "process_reward",
    "progress_loss",
    "rank_agreement",
    "register_learned",
    "register_process_reward",
    "register_score_scale",
    "register_trajectory_reward",
    "roc_auc",
    "step_rewards",
    "train_progress_model",
    "trajectory_reward",
    "trajectory_table",
    "use_progress_model",
    "weighted",
]
