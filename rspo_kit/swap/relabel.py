"""The reward swap as a change of signal (RSPO steps 4-5), and the swap step of one iteration.

The explorer B trains on the dense ``process`` reward (``EXPLORER_SIGNAL``); every trajectory that
reaches the actor A under RSPO, its own and B's replayed ones, is scored by the ``outcome`` reward
alone (``ACTOR_SIGNAL``, ``relabel_outcome``). The replay buffer stores trajectories, never rewards,
so no process reward travels with a replayed trajectory: relabelling is the choice of signal
(``rspo_kit.rewards.signals.RewardModel.step_rewards``) at the moment the actor scores its batch.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from rspo_kit.policy.rollout import Trajectory
from rspo_kit.rewards.signals import RewardModel, Signal
from rspo_kit.swap.replay import ReplayBuffer, admit, mixed_groups
from rspo_kit.swap.stats import swap_metrics

EXPLORER_SIGNAL: Signal = "process"  # "train agent A with dense process rewards to get agent B"
ACTOR_SIGNAL: Signal = "outcome"  # what A learns from under the swap, whatever the trajectory's origin


def relabel_outcome(trajs: Sequence[Trajectory], rewards: RewardModel) -> list[list[float]]:
    """Per trajectory, per step: the outcome reward R_o on the last step and 0 before it.

    >>> from types import SimpleNamespace as NS
    >>> p0, p1 = {"subgoals_done": 0, "subgoals_total": 2}, {"subgoals_done": 1, "subgoals_total": 2}
    >>> step = NS(progress_before=p0, progress_after=p1, action="go to desk 1", valid=True, info={})
    >>> won = NS(steps=[step, step], won=True, score=1.0)
    >>> relabel_outcome([won], RewardModel.build("alfworld"))  # process would be [0.5, 0.5]
    [[0.0, 1.0]]
    """
    return rewards.batch_rewards(trajs, ACTOR_SIGNAL)


@dataclass
class SwapResult:
    """The actor's batch after the swap, and what the swap did."""

    trajs: list[Trajectory]  # task-major: each actor group, then the replayed members of its task
    offpolicy: list[bool]  # per trajectory: replayed (its behaviour policy was the explorer)
    rewards: list[list[float]]  # per trajectory, per step: the outcome signal only
    metrics: dict[str, float]  # swap/* (rspo_kit.swap.stats.swap_metrics)


def reward_swap(
    actor: Sequence[Trajectory],
    explorer: Sequence[Trajectory],
    buffer: ReplayBuffer,
    rewards: RewardModel,
    *,
    replay_ratio: float,
    group_size: int,
    rng: random.Random,
) -> SwapResult:
    """RSPO steps 4-5 up to the update: D_B enters the replay buffer through its filter, judged by
    outcome; each of the actor's groups is joined by M = round(``replay_ratio`` * G) replayed
    trajectories of its task; the mixed batch is scored by the outcome reward alone.
    """
    outcome = rewards.outcome_return
    admitted = admit(buffer, explorer, actor, outcome)
    mixed, offpolicy = mixed_groups(actor, buffer, replay_ratio, group_size, rng)
    metrics = swap_metrics(
        actor,
        explorer,
        mixed,
        offpolicy,
        outcome,
        lambda t: sum(rewards.process_steps(t)),
        admitted,
        len(buffer),
    )
    return SwapResult(mixed, offpolicy, relabel_outcome(mixed, rewards), metrics)
