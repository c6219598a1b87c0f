"""Deriving the explorer B from the actor A (RSPO step 2): "train agent A with dense process rewards
to get agent B".

Every ``swap.sync_every`` iterations B <- A (0: at the first iteration only, a persistent explorer);
then B takes ``swap.explorer_updates`` X-updates on the process reward, on the freshest batch that
is on-policy for B: D_A right after a sync (B = A), otherwise B's own previous rollout D_B. The
X-update itself is the caller's (``rspo_kit.train.update.update`` with the explorer's learner, at
the temperature its batch was sampled at), so that this package stays below the trainer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

from rspo_kit.policy.adapters import ActorExplorer
from rspo_kit.policy.rollout import Trajectory
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.relabel import EXPLORER_SIGNAL

# one X-update of the explorer: (trajectories, their per-step rewards, index of the update) -> metrics
XUpdate = Callable[[list[Trajectory], list[list[float]], int], Mapping[str, float]]


def syncs_at(iteration: int, sync_every: int) -> bool:
    """Whether B <- A at ``iteration`` (1-based): the first iteration and every ``sync_every``-th after;
    ``sync_every=0`` only the first (a persistent explorer, trained on its own rollouts from then on).

    >>> [k for k in range(1, 8) if syncs_at(k, 3)]
    [1, 4, 7]
    >>> [k for k in range(1, 8) if syncs_at(k, 1)]
    [1, 2, 3, 4, 5, 6, 7]
    >>> [k for k in range(1, 8) if syncs_at(k, 0)]
    [1]
    """
    if sync_every == 0:
        return iteration == 1
    return (iteration - 1) % sync_every == 0


def sync_explorer(pair: ActorExplorer, optimizer: torch.optim.Optimizer) -> None:
    """B <- A: the actor's weights (or adapter) into the explorer, and the explorer's optimizer moments
    cleared: B restarts from A, and Adam moments of the B it was would pull it back."""
    pair.sync_explorer()
    optimizer.state.clear()


def derive_explorer(
    pair: ActorExplorer,
    optimizer: torch.optim.Optimizer,
    *,
    iteration: int,
    sync_every: int,
    updates: int,
    actor_batch: Sequence[Trajectory],
    own_batch: Sequence[Trajectory],
    rewards: RewardModel,
    x_update: XUpdate,
) -> dict[str, float]:
    """B for this iteration: synced from A when due (``syncs_at``), then ``updates`` X-updates on process
    rewards.

    ``actor_batch`` is this iteration's D_A, ``own_batch`` the explorer's previous rollout D_B; the
    settings are keywords, so that a call says which count is which.
    Returns the updates' metrics, a later update's value of a key replacing an earlier one's.
    """
    synced = syncs_at(iteration, sync_every)
    if synced:
        sync_explorer(pair, optimizer)
    batch = list(actor_batch if synced else own_batch)
    dense = rewards.batch_rewards(batch, EXPLORER_SIGNAL)
    metrics: dict[str, float] = {}
    for u in range(updates):
        metrics |= x_update(batch, dense, u)
    return metrics
