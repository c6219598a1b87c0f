"""Pure tensor functions for the RL update: advantages, losses and off-policy weights.

Everything here takes flat tensors plus integer ids (task group, trajectory, anchor state,
sequence) and returns tensors: no prints, no randomness, no framework containers. Each function
has a slow loop reference in ``tests/test_algos.py``.

- ``grpo``: group-relative advantages over the trajectories of a task — GRPO (Shao et al. 2024,
  "DeepSeekMath"); group statistics and the share of zero-variance groups.
- ``gigpo``: episode-level plus anchor-state step-level advantages — GiGPO (Feng et al. 2025,
  "Group-in-Group Policy Optimization for LLM Agent Training"); discounted step returns.
- ``gae``: turn-level generalised advantage estimation — GAE (Schulman et al. 2016) — for the
  PPO baseline, and advantage whitening.
- ``losses``: the clipped surrogate and clipped value loss of PPO (Schulman et al. 2017), with
  LUFFY policy shaping (Yan et al. 2025, "Learning to Reason under Off-Policy Guidance") for
  off-policy units; KL penalties, entropies, explained variance.
- ``offpolicy``: per-unit weights for replayed samples (none, truncated IS, LUFFY).

Shared conventions: ``step_traj`` maps each step to its trajectory and the steps of one
trajectory appear in time order (trajectories may be interleaved); float64 inside where sums
or normalisations could lose precision, results in the input's floating dtype.
"""

from rspo_kit.algos.gae import turn_gae, whiten
from rspo_kit.algos.gigpo import (
    EPISODE_STATS,
    EpisodeStats,
    GiGPOAdvantages,
    anchor_groups,
    discounted_returns,
    gigpo_advantages,
)
from rspo_kit.algos.grpo import broadcast_to_steps, group_stats, grpo_advantages, zero_variance_fraction
from rspo_kit.algos.losses import (
    AGGREGATION_MODES,
    KL_KINDS,
    Aggregation,
    KLKind,
    PolicyLossOutput,
    categorical_entropy,
    clipped_policy_loss,
    entropy_from_logits,
    explained_variance,
    kl_penalty,
    value_loss,
)
from rspo_kit.algos.offpolicy import OFFPOLICY_MODES, OffPolicyMode, offpolicy_weights, weight_stats

__all__ = [
    "AGGREGATION_MODES",
    "EPISODE_STATS",
    "KL_KINDS",
    "OFFPOLICY_MODES",
    "Aggregation",
    "EpisodeStats",
    "GiGPOAdvantages",
    "KLKind",
    "OffPolicyMode",
    "PolicyLossOutput",
    "anchor_groups",
    "broadcast_to_steps",
    "categorical_entropy",
    "clipped_policy_loss",
    "discounted_returns",
    "entropy_from_logits",
    "explained_variance",
    "gigpo_advantages",
    "group_stats",
    "grpo_advantages",
    "kl_penalty",
    "offpolicy_weights",
    "turn_gae",
    "value_loss",
    "weight_stats",
    "whiten",
    "zero_variance_fraction",
]
