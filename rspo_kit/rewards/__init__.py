"""Outcome rewards, process rewards and misalignment diagnostics, as pure functions.

``outcome_reward`` scores an episode; process rewards score steps and share one signature
(``ProcessReward``); ``combine`` and ``misalign`` compose them; ``diagnose`` shows where they disagree.
"""

from rspo_kit.rewards import alfworld, webshop  # noqa: F401  (importing them registers the built-in rewards)
from rspo_kit.rewards.diagnostics import (
    Diagnostics,
    HackingReport,
    RankAgreement,
    diagnose,
    disagreement_by_step,
    disagreement_table,
    hacking_rate,
    kendall_tau_b,
    rank_agreement,
    trajectory_table,
)
from rspo_kit.rewards.learned import (
    LearnedPRM,
    PRMConfig,
    ShapedPRM,
    evaluate_prm,
    fit_prm,
    register_learned,
    roc_auc,
)
from rspo_kit.rewards.outcome import (
    OUTCOME_MODES,
    OutcomeConfig,
    OutcomeMode,
    outcome_reward,
    register_score_scale,
)
from rspo_kit.rewards.process import (
    PROCESS_REWARDS,
    ProcessReward,
    ProcessStep,
    WeightedReward,
    combine,
    episode_steps,
    misalign,
    process_return,
    process_reward,
    register_process_reward,
    step_rewards,
    weighted,
)

__all__ = [
    "OUTCOME_MODES",
    "PROCESS_REWARDS",
    "Diagnostics",
    "HackingReport",
    "LearnedPRM",
    "OutcomeConfig",
    "OutcomeMode",
    "PRMConfig",
    "ProcessReward",
    "ProcessStep",
    "RankAgreement",
    "ShapedPRM",
    "WeightedReward",
    "combine",
    "diagnose",
    "disagreement_by_step",
    "disagreement_table",
    "episode_steps",
    "evaluate_prm",
    "fit_prm",
    "hacking_rate",
    "kendall_tau_b",
    "misalign",
    "outcome_reward",
    "process_return",
    "process_reward",
    "rank_agreement",
    "register_learned",
    "register_process_reward",
    "register_score_scale",
    "roc_auc",
    "step_rewards",
    "trajectory_table",
    "weighted",
]
