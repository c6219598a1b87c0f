"""One loop of RSPO as the paper's Algorithm 1 defines it (arXiv 2607.04713, section 4 and Appendix B).

``rspo_loop`` is the recipe, each step a named call:

1. ``explorer_phase``: B <- A, then k X-updates of B, each on a fresh rollout of (1 − α)·B tasks × N
   scored by the dense reward (B's "exploration" under a reward that may be hacked);
2. ``collect``: B rolls out its collection batch, every trajectory relabelled with the **outcome**
   reward (the swap) and stored in D with its behaviour log-probs and off-policy advantage;
3. ``actor_phase``: k X-updates of A, each on (1 − α)·B fresh on-policy tasks × N plus α·B·N
   trajectories drawn from D (reward-based by default), under the outcome reward alone;
4. ``end_loop``: D <- ∅ (or kept, or, for RSPO_H, A's own rollouts of this loop).

The rollouts, updates and B <- A are the caller's (``LoopRun``, implemented by the trainer), so that
this package stays below the trainer; the advantages are X's own (``LoopRun.advantages``). The swap
is a change of signal: nothing the dense reward computed reaches A, whose batch is scored by
``ACTOR_SIGNAL`` and whose replayed advantages were computed under it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.buffer import DrawUnit, LoopBuffer, ReplayEntry, Sampling, TieOrder, draw
from rspo_kit.swap.relabel import ACTOR_SIGNAL, EXPLORER_SIGNAL

Role = Literal["actor", "explorer", "collection"]


class LoopRun(Protocol):
    """What one loop needs from the run that drives it."""

    def sync_explorer(self) -> None:
        """B <- A (and B's optimizer as the run's settings say)."""

    def rollout(self, role: Role, n_tasks: int, step: int) -> list[Any]:
        """``n_tasks`` fresh train tasks × N episodes of A (``actor``) or B (``explorer``,
        ``collection``); ``step`` numbers the loop's rollouts (0 .. 2k), each its own tasks and seed."""

    def update(self, role: Literal["actor", "explorer"], batch: LoopBatch) -> Mapping[str, float]:
        """One X-update of ``role`` on ``batch``; returns its metrics."""

    def advantages(
        self, trajs: Sequence[Any], rewards: Sequence[Sequence[float]]
    ) -> list[list[float]] | None:
        """X's advantages per trajectory and step, groups by ``group_id``; None where X computes them at
        update time (PPO: GAE from the critic of the policy being updated)."""


@dataclass(frozen=True)
class LoopSettings:
    """The loop's numbers and choices (``rspo_kit.train.config.SwapConfig``, as
    ``rspo_kit.train.loop_run.loop_settings`` reads them; docs/training.md argues each)."""

    steps: int = 3  # k
    on_policy_tasks: int = 7  # round((1 − α)·B)
    replayed: int = 8  # round(α·B·N) trajectories drawn for each update of A
    collect_tasks: int = 14
    explorer_steps: bool = True  # False: the control, B = A
    explorer_reward: Literal["dense", "outcome"] = "dense"
    dense_noise: float = 0.0
    replay_source: Literal["explorer", "actor_history"] = "explorer"
    offpolicy_advantage: Literal["collection", "recomputed"] = "collection"
    sampling: Sampling = "reward"
    draw_unit: DrawUnit = "trajectory"
    tie_order: TieOrder = "advantage"
    draw_replacement: bool = False
    buffer: Literal["loop", "fifo"] = "loop"


@dataclass
class LoopBatch:
    """One update's batch: trajectories, their per-step rewards, which are replayed, and the stored
    A_off of replayed ones (None: X computes the advantage at update time)."""

    trajs: list[Any]
    rewards: list[list[float]]
    offpolicy: list[bool] = field(default_factory=list)
    stored_advantages: list[list[float] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.offpolicy = self.offpolicy or [False] * len(self.trajs)
        self.stored_advantages = self.stored_advantages or [None] * len(self.trajs)


@dataclass
class LoopRecord:
    """What one loop did: its batches (for tables, events and viewers) and its metrics."""

    explorer: list[LoopBatch] = field(default_factory=list)  # B's k dense batches
    collection: list[ReplayEntry] = field(default_factory=list)  # B's batch as stored in D
    actor: list[LoopBatch] = field(default_factory=list)  # A's k batches, D_on then D_off
    drawn: list[list[ReplayEntry]] = field(default_factory=list)  # D_off of each of A's updates
    explorer_updates: list[Mapping[str, float]] = field(default_factory=list)
    actor_updates: list[Mapping[str, float]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)


def rspo_loop(
    run: LoopRun, s: LoopSettings, rewards: RewardModel, buffer: LoopBuffer, rng: random.Random
) -> LoopRecord:
    """One loop of Algorithm 1; returns what it did. ``rng`` draws the noise, ties and random sampling."""
    record = LoopRecord()
    if s.replay_source == "explorer":
        run.sync_explorer()  # line 5: π_B <- π_θ
        if s.explorer_steps:
            explorer_phase(run, s, rewards, rng, record)  # lines 6-10: k dense X-steps of B
        collect(run, s, rewards, buffer, record)  # line 11: B's batch, relabelled with the outcome, into D
    actor_phase(run, s, rewards, buffer, rng, record)  # lines 13-18: k outcome X-steps of A on D_on ∪ D_off
    if s.replay_source == "actor_history":  # D as A's draws found it
        record.metrics["swap/buffer_size"] = float(len(buffer))
        record.metrics["swap/buffer_success_share"] = buffer.success_share()
    end_loop(run, s, rewards, buffer, record)  # line 19: D <- ∅
    record.metrics |= loop_metrics(record, rewards)
    return record


def explorer_reward(
    trajs: Sequence[Any], s: LoopSettings, rewards: RewardModel, rng: random.Random
) -> list[list[float]]:
    """B's training reward per step: the dense reward (or the outcome, RSPO_O), with Gaussian noise of
    std ``dense_noise`` on each trajectory's dense return (the paper's Appendix D), on its last step."""
    signal = EXPLORER_SIGNAL if s.explorer_reward == "dense" else ACTOR_SIGNAL
    out = rewards.batch_rewards(trajs, signal)
    if s.dense_noise > 0 and s.explorer_reward == "dense":
        for r in out:
            if r:
                r[-1] += rng.gauss(0.0, s.dense_noise)
    return out


def explorer_phase(
    run: LoopRun, s: LoopSettings, rewards: RewardModel, rng: random.Random, record: LoopRecord
) -> None:
    """k times: a fresh rollout of B on (1 − α)·B tasks, scored by its reward, and one X-update of B."""
    for j in range(s.steps):
        trajs = run.rollout("explorer", s.on_policy_tasks, j)
        batch = LoopBatch(trajs, explorer_reward(trajs, s, rewards, rng))
        record.explorer.append(batch)
        record.explorer_updates.append(run.update("explorer", batch))


def stored_entries(run: LoopRun, trajs: Sequence[Any], rewards: RewardModel) -> list[ReplayEntry]:
    """Trajectories as D stores them: outcome R and A_off, X's advantage within their own groups under
    the outcome (the paper's Figure 2), or None where X computes it at update time."""
    outcome = rewards.batch_rewards(trajs, ACTOR_SIGNAL)
    advantages = run.advantages(trajs, outcome)
    return [
        ReplayEntry(t, rewards.outcome_return(t), None if advantages is None else advantages[i], t.group_id)
        for i, t in enumerate(trajs)
    ]


def collect(
    run: LoopRun, s: LoopSettings, rewards: RewardModel, buffer: LoopBuffer, record: LoopRecord
) -> None:
    """B's collection batch, relabelled with the outcome reward and stored in D."""
    trajs = run.rollout("collection", s.collect_tasks, s.steps)
    record.collection = stored_entries(run, trajs, rewards)
    buffer.add(record.collection)
    record.metrics["swap/buffer_size"] = float(len(buffer))
    record.metrics["swap/buffer_success_share"] = buffer.success_share()


def draw_offpolicy(
    buffer: LoopBuffer, s: LoopSettings, used: set[int], rng: random.Random
) -> list[ReplayEntry]:
    """D_off for one update of A: ``s.replayed`` entries by ``s.sampling``; without replacement, none of
    the ``used`` (buffer positions drawn earlier this loop), which it extends."""
    pool = [i for i in range(len(buffer)) if s.draw_replacement or i not in used]
    picked = draw([buffer.entries[i] for i in pool], s.replayed, s.sampling, rng, s.draw_unit, s.tie_order)
    used.update(pool[i] for i in picked)
    return [buffer.entries[pool[i]] for i in picked]


def actor_batch(
    on: Sequence[Any], drawn: Sequence[ReplayEntry], s: LoopSettings, rewards: RewardModel
) -> LoopBatch:
    """D_on ∪ D_off scored by the outcome alone; replayed trajectories keep their collection groups
    (their advantage is their stored A_off, or X's over the drawn ones with ``recomputed``)."""
    trajs = [*on, *(_replayed(e.traj) for e in drawn)]
    stored = [None] * len(on) + [
        e.advantages if s.offpolicy_advantage == "collection" else None for e in drawn
    ]
    return LoopBatch(
        trajs, rewards.batch_rewards(trajs, ACTOR_SIGNAL), [False] * len(on) + [True] * len(drawn), stored
    )


def actor_phase(
    run: LoopRun,
    s: LoopSettings,
    rewards: RewardModel,
    buffer: LoopBuffer,
    rng: random.Random,
    record: LoopRecord,
) -> None:
    """k times: A's fresh rollout (D_on), α·B·N trajectories drawn from D (D_off), one X-update of A."""
    used: set[int] = set()
    for j in range(s.steps):
        on = run.rollout("actor", s.on_policy_tasks, s.steps + 1 + j)
        drawn = draw_offpolicy(buffer, s, used, rng)
        batch = actor_batch(on, drawn, s, rewards)
        record.actor.append(batch)
        record.drawn.append(drawn)
        record.actor_updates.append(run.update("actor", batch))


def end_loop(
    run: LoopRun, s: LoopSettings, rewards: RewardModel, buffer: LoopBuffer, record: LoopRecord
) -> None:
    """D <- ∅ (``buffer = loop``) or kept (``fifo``). RSPO_H: D then takes A's own on-policy rollouts
    of this loop, with their advantages under the outcome, for the next loop to replay."""
    if s.buffer == "loop":
        buffer.clear()
    if s.replay_source == "actor_history":
        own = [t for b in record.actor for t, off in zip(b.trajs, b.offpolicy, strict=True) if not off]
        buffer.add(stored_entries(run, own, rewards))


def _replayed(traj: Any) -> Any:
    """A shallow copy of a stored trajectory marked as replayed (its steps, log-probs and group are B's)."""
    import copy

    member = copy.copy(traj)
    member.source = "replay"
    return member


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def loop_metrics(record: LoopRecord, rewards: RewardModel) -> dict[str, float]:
    """What the swap did in one loop, as ``explorer/*`` and ``swap/*`` metrics.

    B's dense return and success before its k steps (its first rollout, B = A) and after them (the
    collection); the collection's success; what the draws picked (outcome, success, stored advantage).
    The buffer's size and success share as A's draws found it are set by ``collect``. NaN where a loop has no such part (the control has no dense steps, RSPO_H no B).
    """
    dense = [[sum(rewards.process_steps(t)) for t in b.trajs] for b in record.explorer]
    collected = [e.traj for e in record.collection]
    drawn = [e for d in record.drawn for e in d]
    stored = [a for e in drawn if e.advantages for a in e.advantages]
    return {
        "explorer/dense_before": _mean(dense[0]) if dense else math.nan,
        "explorer/success_before": _mean([t.won for t in record.explorer[0].trajs]) if dense else math.nan,
        "explorer/dense_after": _mean([sum(rewards.process_steps(t)) for t in collected]),
        "explorer/success_after": _mean([t.won for t in collected]),
        "swap/collect_success": _mean([t.won for t in collected]),
        "swap/collected": float(len(collected)),
        "swap/replayed": float(len(drawn)),
        "swap/drawn_outcome_mean": _mean([e.outcome for e in drawn]),
        "swap/drawn_success_share": _mean([e.traj.won for e in drawn]),
        "swap/drawn_advantage_mean": _mean(stored),
    }
