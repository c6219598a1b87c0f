"""Index helpers shared by the advantage estimators: dense group ids and per-trajectory layout.

Trajectories arrive flat: one row per step, with ``step_traj[s]`` naming the trajectory of step s.
The estimators that run along time (discounted returns, GAE) scatter the steps into a padded
``(n_traj, T)`` grid, work on whole rows at once, and gather the results back to ``(S,)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def float_dtype(*tensors: Tensor) -> torch.dtype:
    """The dtype results come back in: the promoted input dtype if floating, else torch's default."""
    dtype = tensors[0].dtype
    for tensor in tensors[1:]:
        dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def check_1d(name: str, tensor: Tensor, length: int | None = None) -> None:
    """Raise a ValueError naming ``name`` unless ``tensor`` is 1-D (and ``length`` long, if given)."""
    if tensor.dim() != 1 or (length is not None and tensor.shape[0] != length):
        want = "(N,)" if length is None else f"({length},)"
        raise ValueError(f"{name} must have shape {want}, got {tuple(tensor.shape)}")


def dense_ids(ids: Tensor) -> tuple[Tensor, int]:
    """Map arbitrary integer ids (N,) to 0..G-1 in sorted order of the distinct ids; returns (ids, G)."""
    unique, inverse = torch.unique(ids, return_inverse=True)
    return inverse, unique.numel()


@dataclass(frozen=True)
class TrajectoryLayout:
    """Where each step sits in a padded ``(n_traj, max_len)`` grid.

    ``row`` is the trajectory's dense index (sorted trajectory ids), ``col`` the step's position in
    its trajectory, counted in order of appearance in the flat arrays. Padding is always a suffix
    of a row, so anything padded with zeros after a trajectory's last step acts as "episode over".
    """

    row: Tensor  # (S,) long
    col: Tensor  # (S,) long
    n_traj: int
    max_len: int

    def pad(self, values: Tensor) -> Tensor:
        """(S,) -> (n_traj, max_len), zeros after each trajectory's last step."""
        grid = values.new_zeros(self.n_traj, self.max_len)
        grid[self.row, self.col] = values
        return grid

    def unpad(self, grid: Tensor) -> Tensor:
        """(n_traj, max_len) -> (S,), in the order of the flat arrays."""
        return grid[self.row, self.col]


def trajectory_layout(step_traj: Tensor) -> TrajectoryLayout:
    """Row and column of every step of ``step_traj`` (S,).

    The steps of one trajectory must appear in time order; trajectories may be interleaved. A
    stable sort by trajectory keeps each trajectory's steps in their order of appearance, so the
    position in the trajectory is the rank within the sorted block.
    """
    row, n_traj = dense_ids(step_traj)
    order = torch.argsort(row, stable=True)
    counts = torch.bincount(row, minlength=n_traj)
    starts = torch.cumsum(counts, 0) - counts  # (n_traj,) first sorted position of each trajectory
    col = torch.empty_like(row)
    col[order] = torch.arange(row.numel(), device=row.device) - starts[row[order]]
    max_len = int(counts.max()) if n_traj else 0
    return TrajectoryLayout(row=row, col=col, n_traj=n_traj, max_len=max_len)


def discount_matrix(discount: float, length: int, device: torch.device | None = None) -> Tensor:
    """(length, length) float64 upper-triangular D with D[t, k] = discount^(k−t) for k ≥ t, else 0.

    ``grid @ D.T`` turns each row x of ``grid`` into its discounted suffix sums
    y_t = Σ_{k≥t} discount^(k−t) x_k. Every power is ≤ 1 for discount in [0, 1], so nothing grows
    with the trajectory length (a reverse cumsum of discount^(−t)-scaled values would overflow or
    cancel catastrophically for T≈60, discount=0.5). O(T²) per row, trivial for T of tens.
    """
    positions = torch.arange(length, device=device, dtype=torch.float64)
    lag = positions[None, :] - positions[:, None]  # (T, T): k − t
    powers = torch.tensor(discount, dtype=torch.float64, device=device) ** lag.clamp(min=0)
    return torch.where(lag >= 0, powers, torch.zeros_like(powers))


def discounted_suffix_sums(values: Tensor, layout: TrajectoryLayout, discount: float) -> Tensor:
    """y_t = Σ_{k≥t, same trajectory} discount^(k−t) x_k for flat ``values`` (S,); float64 (S,)."""
    grid = layout.pad(values.to(torch.float64))  # (n_traj, T)
    return layout.unpad(grid @ discount_matrix(discount, layout.max_len, values.device).T)
