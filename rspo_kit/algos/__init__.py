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
- ``offpolicy``: per-unit corrections for replayed samples (GePPO's shifted clip, truncated IS,
  LUFFY, none).

Shared conventions: ``step_traj`` maps each step to its trajectory and the steps of one
trajectory appear in time order (trajectories may be interleaved); float64 inside where sums
or normalisations could lose precision, results in the input's floating dtype.
"""

from __future__ import annotations

from rspo_kit._lazy import lazy_exports, submodule_homes

# Each name loads its module (and torch) on first use, so that ``rspo_kit.train.config`` can take
# ``OffPolicyMode`` from ``offpolicy`` without importing torch.
_NAMES = {
    "gae": ("turn_gae", "whiten"),
    "gigpo": (
        "EPISODE_STATS",
        "EpisodeStats",
        "GiGPOAdvantages",
        "anchor_groups",
        "discounted_returns",
        "gigpo_advantages",
    ),
    "grpo": ("broadcast_to_steps", "group_stats", "grpo_advantages", "zero_variance_fraction"),
    "losses": (
        "AGGREGATION_MODES",
        "KL_KINDS",
        "Aggregation",
        "KLKind",
        "PolicyLossOutput",
        "categorical_entropy",
        "clipped_policy_loss",
        "entropy_from_logits",
        "explained_variance",
        "kl_penalty",
        "value_loss",
    ),
    "offpolicy": ("OFFPOLICY_MODES", "OffPolicyMode", "offpolicy_weights", "shifted_center", "weight_stats"),
}
_HOME = submodule_homes(__name__, _NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOME)
__all__ = sorted(_HOME)
