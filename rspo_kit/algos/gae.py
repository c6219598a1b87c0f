"""Turn-level GAE for the PPO baseline, and advantage whitening.

Each environment step (one agent turn) is one GAE step with one value estimate, as in
multi-turn agent PPO: the critic scores the prompt of each turn, not each token. Every
trajectory ends in a terminal state, so the value after its last step is 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rspo_kit.algos._index import check_1d, discount_matrix, float_dtype, trajectory_layout


def turn_gae(
    rewards: Tensor, values: Tensor, step_traj: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """GAE(γ, λ) over the turns of each trajectory; returns ``(advantages, returns)``, each (S,).

    rewards, values: (S,) per turn; step_traj: (S,) integer trajectory ids, the turns of one
    trajectory in time order (trajectories may be interleaved). The last turn of each trajectory
    is terminal (next value 0): a trajectory cut off by the step cap is treated as ended, not
    bootstrapped. Advantages and returns are targets, so ``values`` is detached. Computed in
    float64 for all trajectories at once: the recursion A_t = δ_t + γλ·A_{t+1} is the discounted
    suffix sum of δ, done as one product with a (T, T) discount matrix instead of a loop over time.

    >>> adv, ret = turn_gae(torch.tensor([0.0, 1.0]), torch.tensor([0.5, 0.5]), torch.tensor([0, 0]), 1.0, 1.0)
    >>> adv.tolist(), ret.tolist()
    ([0.5, 0.5], [1.0, 1.0])
    """
    check_1d("rewards", rewards)
    check_1d("values", values, rewards.shape[0])
    check_1d("step_traj", step_traj, rewards.shape[0])
    layout = trajectory_layout(step_traj)
    reward_grid = layout.pad(rewards.detach().to(torch.float64))  # (n_traj, T)
    value_grid = layout.pad(values.detach().to(torch.float64))  # (n_traj, T), 0 after the last turn
    next_value = torch.zeros_like(value_grid)
    next_value[:, :-1] = value_grid[:, 1:]  # V(s_{t+1}); the padding makes it 0 after a terminal turn
    delta = reward_grid + gamma * next_value - value_grid  # PPO (Schulman et al. 2017), Eq. 12
    # GAE (Schulman et al. 2016), Eq. 16: A_t = Σ_l (γλ)^l δ_{t+l}; padded δ are 0.
    advantage_grid = delta @ discount_matrix(gamma * lam, layout.max_len, delta.device).T
    advantages = layout.unpad(advantage_grid)
    returns = advantages + values.detach().to(torch.float64)  # the critic's regression target
    dtype = float_dtype(rewards, values)
    return advantages.to(dtype), returns.to(dtype)


def whiten(x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """(x − mean) / sqrt(var + eps) with mean and unbiased var over the masked elements.

    x: any shape; mask: same shape, bool or float weights (None = all). Every element is
    transformed, masked-out ones included, with the masked statistics. ``shift_mean=False`` adds
    the mean back, rescaling without centring (TRL's ``masked_whiten`` convention). Returns the
    dtype of ``x``. Raises ValueError when the mask selects nothing.

    >>> whiten(torch.tensor([1.0, 2.0, 3.0]))
    tensor([-1.,  0.,  1.])
    """
    values = x.to(torch.float64)
    weight = torch.ones_like(values) if mask is None else mask.to(torch.float64).expand_as(values)
    n = weight.sum()
    if not n > 0:
        raise ValueError("whiten: mask selects no elements")
    mean = (values * weight).sum() / n
    # Bessel's correction; a single selected element has variance 0 and whitens to 0.
    var = ((values - mean) ** 2 * weight).sum() / (n - 1).clamp(min=1)
    white = (values - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        white = white + mean
    return white.to(float_dtype(x))
