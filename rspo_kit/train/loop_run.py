"""The trainer's side of the paper's loop: what ``rspo_kit.swap.loop.rspo_loop`` drives, one loop of
Algorithm 1 an iteration (``swap.mode`` rspo, control).

``loop_settings(cfg)`` is the loop's numbers and choices as the run's config sets them; a
``TrainerLoopRun`` is the ``rspo_kit.swap.loop.LoopRun`` that one loop calls: B <- A, the rollouts on
fresh train tasks, X's updates and advantages, and what they spend (``budget/*``). It acts through
the trainer's own learners, seeds, temperatures and events, and keeps the loop's trajectories,
batches and seconds for the iteration's metrics and table.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.rollout import RolloutConfig, Trajectory, rollout
from rspo_kit.swap.loop import LoopBatch, LoopSettings
from rspo_kit.train.config import RunConfig
from rspo_kit.train.update import UpdateBatch, batch_advantages

if TYPE_CHECKING:
    from rspo_kit.train.trainer import Trainer


def loop_settings(cfg: RunConfig) -> LoopSettings:
    """The paper's loop as ``cfg`` sets it."""
    s = cfg.swap
    return LoopSettings(
        steps=s.loop_steps,
        on_policy_tasks=cfg.on_policy_tasks,
        replayed=cfg.replayed_per_update,
        collect_tasks=cfg.collect_tasks,
        explorer_steps=s.mode == "rspo",
        explorer_reward=s.explorer_reward,
        dense_noise=cfg.reward.dense_noise,
        replay_source=s.replay_source,
        offpolicy_advantage=s.offpolicy_advantage,
        sampling=s.sampling,
        draw_unit=s.draw_unit,
        tie_order=s.tie_order,
        draw_replacement=s.draw_replacement,
        buffer=s.buffer,
    )


class TrainerLoopRun:
    """The trainer's side of one loop of Algorithm 1 (``rspo_kit.swap.loop.LoopRun``): B <- A, the
    rollouts on fresh train tasks, X's updates and advantages, and what they spent (``budget/*``)."""

    def __init__(self, trainer: Trainer, runner: BatchRunner, k: int):
        self.trainer, self.runner, self.k = trainer, runner, k
        self.trajs: dict[str, list[Trajectory]] = {"actor": [], "explorer": [], "collection": []}
        self.batches: dict[str, list[UpdateBatch]] = {"actor": [], "explorer": [], "collection": []}
        self.clock: dict[str, float] = {}

    def _timed(self, key: str, seconds: float) -> None:
        self.clock[key] = self.clock.get(key, 0.0) + seconds

    def sync_explorer(self) -> None:
        """B <- A: the actor's weights (and PPO's critic) into the explorer; B's optimizer moments
        cleared with ``swap.explorer_optimizer = "fresh"`` (Adam moments of last loop's B would pull it
        back), kept with ``carry``."""
        t = self.trainer
        fresh = t.cfg.swap.explorer_optimizer == "fresh"
        t.pair.sync_explorer()
        actor, explorer = t.learners["actor"], t.learners["explorer"]
        if fresh:
            explorer.optimizer.state.clear()
        if actor.value_head is not None:
            explorer.value_head.load_state_dict(actor.value_head.state_dict())
            if fresh:
                explorer.value_optimizer.state.clear()

    def rollout(self, role: str, n_tasks: int, step: int) -> list[Trajectory]:
        t, cfg = self.trainer, self.trainer.cfg
        policy_role = "actor" if role == "actor" else "explorer"
        rcfg = RolloutConfig(
            group_size=cfg.algo.group_size,
            temperature=t._temperature(policy_role),
            max_new_tokens=cfg.policy.max_new_tokens,
            epsilon=0.0 if role == "actor" else cfg.swap.explorer_epsilon,
        )
        tasks = random.Random(t._seed("tasks", self.k, step)).sample(t.pool, n_tasks)
        index = (self.k - 1) * (2 * cfg.swap.loop_steps + 1) + step + 1  # each rollout its groups and seed
        seed = 2 * cfg.train.seed + (role != "actor")
        start = time.perf_counter()
        policy = t._learner(policy_role).policy
        clock: dict[str, float] = {}  # the rollout's prompt, model and env seconds
        trajs = rollout(
            policy, self.runner, tasks, rcfg, iteration=index, seed=seed, source=role, timings=clock
        )
        self._timed(f"perf/{role}_rollout_s", time.perf_counter() - start)
        for part, seconds in clock.items():
            self._timed(f"perf/{role}_rollout_{part}_s", seconds)
        self.trajs[role] += trajs
        t.budget["env_steps_actor" if role == "actor" else "env_steps_explorer"] += sum(
            x.env_steps for x in trajs
        )
        t._emit("on_rollout_end", self.k, {}, role=role, trajectories=trajs)
        return trajs

    def update(self, role: str, batch: LoopBatch) -> Mapping[str, float]:
        t, cfg = self.trainer, self.trainer.cfg
        ub = UpdateBatch(batch.trajs, batch.rewards, batch.offpolicy, batch.stored_advantages)
        algo = cfg.algo if role == "actor" else replace(cfg.algo, lr=cfg.explorer_lr)
        start = time.perf_counter()
        metrics = t._update(role, ub, algo, t._seed(role, self.k, len(self.batches[role])))
        self._timed(f"perf/{role}_update_s", time.perf_counter() - start)
        t.budget[f"{role}_updates"] += 1
        self.batches[role].append(ub)
        return metrics

    def advantages(
        self, trajs: Sequence[Trajectory], rewards: Sequence[Sequence[float]]
    ) -> list[list[float]] | None:
        cfg = self.trainer.cfg
        batch = UpdateBatch(list(trajs), [list(r) for r in rewards])
        if cfg.algo.name == "ppo":  # GAE from the critic of the policy being updated, at update time
            if trajs and trajs[0].source == "collection":
                self.batches["collection"].append(batch)
            return None
        flat = batch_advantages(batch, cfg.algo).step
        batch.advantages = flat
        if trajs and trajs[0].source == "collection":  # RSPO_H stores A's own rollouts, tabled already
            self.batches["collection"].append(batch)
        out, i = [], 0
        for traj in trajs:
            out.append(flat[i : i + len(traj.steps)].tolist())
            i += len(traj.steps)
        return out
