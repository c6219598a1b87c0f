"""RSPO's reward swap: the replay buffer of relabelled explorer trajectories, group mixing, metrics.

The loop itself (actor rollout, explorer derivation, explorer rollout, swap, mixed actor update) is
``rspo_kit.train.trainer``; this package holds its parts. Relabelling is a change of signal: the
explorer trains on ``process`` rewards, and its trajectories reach the actor scored by
``RewardModel.step_rewards(traj, "outcome")`` only (see ``rspo_kit.rewards.signals``).
"""

from rspo_kit.swap.replay import FILTERS, ReplayBuffer, mixed_groups
from rspo_kit.swap.stats import group_outcomes, swap_metrics

__all__ = ["FILTERS", "ReplayBuffer", "group_outcomes", "mixed_groups", "swap_metrics"]
