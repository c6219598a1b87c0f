"""GiGPO: episode-level plus step-level group-relative advantages (Feng et al. 2025).

"Group-in-Group Policy Optimization for LLM Agent Training" (arXiv 2505.10978). The recipe:

1. episode advantage A^E — GRPO over the trajectories of a task group (Eq. 3);
2. discounted step return R_t = Σ_{k≥t} γ^(k−t) r_k within each trajectory (Eq. 5);
3. anchor-state grouping — steps of one task group that start from the same environment state
   (same ``anchor`` id) form a step group (Eq. 6);
4. step advantage A^S — R_t relative to its step group (Eq. 7); a singleton step group gives 0;
5. A = A^E + ω·A^S (Eq. 8).

Inputs are flat: trajectories (N,) with their task ``group``; steps (S,) with ``step_traj`` (the
index 0..N−1 of each step's trajectory) and ``anchor`` (an integer per distinct anchor state).
The steps of one trajectory must appear in time order; trajectories may be interleaved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

from rspo_kit.algos._index import check_1d, discounted_suffix_sums, float_dtype, trajectory_layout
from rspo_kit.algos.grpo import broadcast_to_steps, grpo_advantages

EpisodeStats = Literal["trajectories", "steps"]
EPISODE_STATS: tuple[str, ...] = get_args(EpisodeStats)


@dataclass(frozen=True)
class GiGPOAdvantages:
    """GiGPO advantages per step, with the anchor groups they were computed over."""

    episode: Tensor  # (S,) A^E of the step's trajectory (Eq. 3)
    step: Tensor  # (S,) A^S within the step's anchor group (Eq. 7)
    total: Tensor  # (S,) A^E + ω·A^S (Eq. 8)
    step_group: Tensor  # (S,) long, dense id 0..K−1 of the step's anchor group (Eq. 6)
    step_group_size: Tensor  # (S,) long, number of steps in that group


def discounted_returns(step_rewards: Tensor, step_traj: Tensor, gamma: float) -> Tensor:
    """R_t = Σ_{k≥t} γ^(k−t) r_k within each trajectory (Feng et al. 2025, Eq. 5).

    step_rewards: (S,); step_traj: (S,) integer trajectory ids. The steps of a trajectory must
    appear in time order (earlier steps first); trajectories may be contiguous blocks or
    interleaved. Returns (S,) in the dtype of ``step_rewards``; computed in float64 with a
    discount matrix (all powers ≤ 1, stable for long trajectories).

    >>> discounted_returns(torch.tensor([0.0, 0.0, 1.0, 2.0]), torch.tensor([5, 5, 5, 8]), gamma=0.5)
    tensor([0.2500, 0.5000, 1.0000, 2.0000])
    """
    check_1d("step_rewards", step_rewards)
    check_1d("step_traj", step_traj, step_rewards.shape[0])
    layout = trajectory_layout(step_traj)
    returns = discounted_suffix_sums(step_rewards.detach(), layout, gamma)  # Eq. 5
    return returns.to(float_dtype(step_rewards))


def anchor_groups(group: Tensor, step_traj: Tensor, anchor: Tensor) -> tuple[Tensor, Tensor]:
    """Step groups: identical ``anchor`` within the same task group (Feng et al. 2025, Eq. 6).

    group: (N,) task ids per trajectory; step_traj: (S,) trajectory index per step; anchor: (S,)
    integer anchor-state ids. Returns ``(step_group, size)``, both (S,) long; step_group is a
    dense id 0..K−1 in sorted order of (task group, anchor), so it is deterministic.
    """
    check_1d("step_traj", step_traj)
    check_1d("anchor", anchor, step_traj.shape[0])
    key = torch.stack([group[step_traj].long(), anchor.long()], dim=1)  # (S, 2)
    _, step_group, size = torch.unique(key, dim=0, return_inverse=True, return_counts=True)
    return step_group, size[step_group]


def _episode_over_trajectories(
    episode_returns: Tensor, group: Tensor, step_traj: Tensor, use_std: bool, eps: float
) -> Tensor:
    """Paper Eq. 3: each trajectory counts once in its group's mean and std."""
    return broadcast_to_steps(grpo_advantages(episode_returns, group, use_std, eps), step_traj)


def _episode_over_steps(
    episode_returns: Tensor, group: Tensor, step_traj: Tensor, use_std: bool, eps: float
) -> Tensor:
    """verl-agent's default: one sample per step, so a trajectory weighs by its length."""
    return grpo_advantages(episode_returns[step_traj], group[step_traj], use_std, eps)


EPISODE_ADVANTAGES: dict[str, Callable[[Tensor, Tensor, Tensor, bool, float], Tensor]] = {
    "trajectories": _episode_over_trajectories,
    "steps": _episode_over_steps,
}


def gigpo_advantages(
    episode_returns: Tensor,
    group: Tensor,
    step_rewards: Tensor,
    step_traj: Tensor,
    anchor: Tensor,
    gamma: float = 0.95,
    omega: float = 1.0,
    # No std division by default, as verl-agent's reference (mode "mean_norm"): the std of a small
    # step group is noisy, and dividing by it inflates tiny return differences into full-size ones.
    use_std: bool = False,
    episode_stats: EpisodeStats = "trajectories",  # the paper's Eq. 3; "steps" is verl-agent's
    eps: float = 1e-6,
) -> GiGPOAdvantages:
    """A = A^E + ω·A^S per step (Feng et al. 2025, Eq. 8).

    episode_returns: (N,) outcome per trajectory; group: (N,) task ids; step_rewards: (S,);
    step_traj: (S,) index 0..N−1 of each step's trajectory (steps in time order within a
    trajectory); anchor: (S,) integer anchor-state ids (equal ids = same state).

    ``episode_stats="trajectories"`` (default) normalises A^E over the trajectories of a group (Eq. 3);
    ``"steps"`` over all step samples of the group, each trajectory's return repeated once per step
    (verl-agent's reference), so longer trajectories weigh more in the mean and std.
    ``use_std`` applies to both levels. A task group of one trajectory gets A^E = 0 (verl-agent
    gives it its raw return instead), like any singleton step group gets A^S = 0. Returns a ``GiGPOAdvantages`` of (S,) tensors in the
    floating dtype of the inputs.

    >>> adv = gigpo_advantages(
    ...     episode_returns=torch.tensor([1.0, 0.0]), group=torch.tensor([0, 0]),
    ...     step_rewards=torch.tensor([0.0, 1.0, 0.0, 0.0]), step_traj=torch.tensor([0, 0, 1, 1]),
    ...     anchor=torch.tensor([10, 11, 10, 12]), gamma=0.5)
    >>> adv.episode.tolist(), adv.step.tolist(), adv.step_group_size.tolist()
    ([0.5, 0.5, -0.5, -0.5], [0.25, 0.0, -0.25, 0.0], [2, 1, 2, 1])
    """
    if episode_stats not in EPISODE_ADVANTAGES:
        raise ValueError(f"episode_stats must be one of {EPISODE_STATS}, got {episode_stats!r}")
    check_1d("episode_returns", episode_returns)
    check_1d("group", group, episode_returns.shape[0])
    check_1d("step_rewards", step_rewards)
    check_1d("step_traj", step_traj, step_rewards.shape[0])
    check_1d("anchor", anchor, step_rewards.shape[0])
    dtype = float_dtype(episode_returns, step_rewards)

    returns = episode_returns.detach().to(torch.float64)
    episode = EPISODE_ADVANTAGES[episode_stats](returns, group, step_traj, use_std, eps)  # Eq. 3
    step_returns = discounted_returns(step_rewards.detach().to(torch.float64), step_traj, gamma)  # Eq. 5
    step_group, step_group_size = anchor_groups(group, step_traj, anchor)  # Eq. 6
    step = grpo_advantages(step_returns, step_group, use_std, eps)  # Eq. 7; singleton -> 0
    total = episode + omega * step  # Eq. 8
    return GiGPOAdvantages(
        episode=episode.to(dtype),
        step=step.to(dtype),
        total=total.to(dtype),
        step_group=step_group,
        step_group_size=step_group_size,
    )
