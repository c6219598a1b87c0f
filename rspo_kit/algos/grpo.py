"""GRPO: group-relative advantages over the trajectories sampled for one task (Shao et al. 2024).

A group is every trajectory sampled for the same task; each trajectory's advantage is its
outcome relative to its group, A_i = (R_i − mean_g R) / (std_g R + ε), and every step of the
trajectory gets that value. No critic: the group mean is the baseline.

All functions take flat tensors plus integer group ids (any ids, not necessarily 0..G−1) and
work in float64 inside, returning the input's floating dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rspo_kit.algos._index import check_1d, dense_ids, float_dtype


def _moments(values: Tensor, inverse: Tensor, n_groups: int) -> tuple[Tensor, Tensor, Tensor]:
    """Per-group mean, unbiased std and count, each (G,), of float64 ``values`` (N,).

    Two passes (mean first, then squared deviations) rather than E[x²] − E[x]², which cancels
    badly when the spread is small next to the mean. A singleton has std 0 (its only deviation
    is 0 and the divisor n − 1 is clamped to 1), so it never divides by zero.
    """
    count = torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add_(
        0, inverse, torch.ones_like(values)
    )
    total = torch.zeros_like(count).index_add_(0, inverse, values)
    mean = total / count.clamp(min=1)
    deviation = values - mean[inverse]  # (N,)
    squares = torch.zeros_like(count).index_add_(0, inverse, deviation * deviation)
    std = torch.sqrt(squares / (count - 1).clamp(min=1))
    return mean, std, count


def group_stats(values: Tensor, group: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Mean, unbiased std (n−1) and size of each element's group, broadcast back per element.

    values: (N,) float; group: (N,) integer ids. Returns ``(mean, std, count)``, each (N,):
    mean and std in the dtype of ``values``, count as long. The std of a singleton group is 0.

    >>> mean, std, count = group_stats(torch.tensor([1.0, 3.0, 5.0]), torch.tensor([7, 7, 2]))
    >>> mean.tolist(), std.tolist(), count.tolist()
    ([2.0, 2.0, 5.0], [1.4142135381698608, 1.4142135381698608, 0.0], [2, 2, 1])
    """
    check_1d("values", values)
    check_1d("group", group, values.shape[0])
    inverse, n_groups = dense_ids(group)
    mean, std, count = _moments(values.to(torch.float64), inverse, n_groups)
    dtype = float_dtype(values)
    return mean[inverse].to(dtype), std[inverse].to(dtype), count[inverse].long()


def grpo_advantages(rewards: Tensor, group: Tensor, use_std: bool = True, eps: float = 1e-6) -> Tensor:
    """A_i = (R_i − mean_g) / (std_g + eps), or R_i − mean_g when ``use_std`` is False.

    rewards: (N,) one outcome per trajectory; group: (N,) integer task ids, any values.
    Returns (N,) in the dtype of ``rewards``. A singleton group gets 0 (R_i equals its own mean),
    and so does a group whose rewards are all equal. The default divides by the std as in
    DeepSeekMath's outcome supervision (Shao et al. 2024, §4.1.2); ``use_std=False`` keeps the
    reward scale (Dr. GRPO, Liu et al. 2025, argue the division overweights near-uniform groups).

    >>> grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 5.0]), torch.tensor([0, 0, 0, 9]), use_std=False)
    tensor([ 0.6667, -0.3333, -0.3333,  0.0000])
    """
    check_1d("rewards", rewards)
    check_1d("group", group, rewards.shape[0])
    inverse, n_groups = dense_ids(group)
    values = rewards.to(torch.float64)
    mean, std, _ = _moments(values, inverse, n_groups)
    centred = values - mean[inverse]  # Shao et al. 2024, §4.1.2: r̃_i = (r_i − mean(r)) / std(r)
    advantages = centred / (std[inverse] + eps) if use_std else centred
    return advantages.to(float_dtype(rewards))


def broadcast_to_steps(traj_values: Tensor, step_traj: Tensor) -> Tensor:
    """Every step gets its trajectory's value: out[s] = traj_values[step_traj[s]].

    traj_values: (N,); step_traj: (S,) long, the position of each step's trajectory in
    ``traj_values`` (an index in 0..N−1, not an arbitrary id). Returns (S,).
    """
    check_1d("traj_values", traj_values)
    check_1d("step_traj", step_traj)
    return traj_values[step_traj]


def zero_variance_fraction(rewards: Tensor, group: Tensor) -> Tensor:
    """Share of groups whose rewards are all equal: the groups that give GRPO no signal.

    rewards: (N,); group: (N,) integer ids. Returns a 0-d float tensor in [0, 1]; a singleton
    group counts as zero-variance (one sample cannot be compared with anything). NaN when N = 0.

    >>> zero_variance_fraction(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 1, 1, 2]))
    tensor(0.6667)
    """
    check_1d("rewards", rewards)
    check_1d("group", group, rewards.shape[0])
    inverse, n_groups = dense_ids(group)
    values = rewards.to(torch.float64)
    highest = torch.full((n_groups,), -torch.inf, dtype=torch.float64, device=values.device)
    lowest = torch.full_like(highest, torch.inf)
    highest = highest.scatter_reduce(0, inverse, values, reduce="amax")
    lowest = lowest.scatter_reduce(0, inverse, values, reduce="amin")
    return (highest == lowest).to(torch.float64).mean().to(float_dtype(rewards))
