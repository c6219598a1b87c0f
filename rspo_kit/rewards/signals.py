"""Per-step reward vectors of a trajectory under a training signal: outcome, process or their mix.

The base algorithms consume one vector per trajectory (r_0 … r_{T-1}); the episode return is its
sum. ``outcome`` puts R_o on the last step (sparse), ``process`` is r_p per step (dense), ``mix`` is
λ·r_p per step plus R_o at the end. RSPO's swap is exactly the change of signal from ``process``
(what the explorer trained on) to ``outcome`` (what the actor sees) for the explorer's trajectories.

A process reward that reads whole trajectories (``process.TrajectoryReward``: the learned progress
model, ``rewards.progress_model``) is found by name too; it scores all steps of a batch in one pass.

Trajectories are duck-typed: ``.steps`` (each with ``progress_before``, ``progress_after``,
``action``, ``valid``, ``info``), ``.won``, ``.score`` and ``.env``/``env`` given explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from rspo_kit.rewards.outcome import OutcomeConfig, outcome_reward
from rspo_kit.rewards.process import (
    NeedsTrajectory,
    ProcessReward,
    TrajectoryReward,
    misalign,
    process_reward,
    trajectory_reward,
)

Signal = Literal["outcome", "process", "mix"]
SIGNALS: tuple[str, ...] = get_args(Signal)


@dataclass(frozen=True)
class RewardModel:
    """The outcome and process rewards of one env, and the mixing weight λ."""

    env: str
    outcome: OutcomeConfig
    process: ProcessReward
    mix_lambda: float = 0.5
    # a process reward over whole trajectories (the progress model); ``process`` is then its stand-in
    trajectory_process: TrajectoryReward | None = None

    @classmethod
    def build(
        cls,
        env: str,
        outcome: OutcomeConfig | None = None,
        process: str = "subgoal",
        misalign_eps: float = 0.0,
        mix_lambda: float = 0.5,
        hack: str = "hack",
    ) -> RewardModel:
        scorer = trajectory_reward(process, env=env)
        if scorer is not None:
            if misalign_eps:
                raise ValueError(
                    f"misalign_eps = {misalign_eps} mixes a hack into a step-level process reward, and "
                    f"{process!r} reads whole trajectories: set misalign_eps = 0"
                )
            return cls(env, outcome or OutcomeConfig(), NeedsTrajectory(process, env), mix_lambda, scorer)
        reward = (
            misalign(misalign_eps, env=env, base=process, hack=hack)
            if misalign_eps
            else process_reward(process, env=env)
        )
        return cls(env, outcome or OutcomeConfig(), reward, mix_lambda)

    def outcome_return(self, traj: Any) -> float:
        """R_o of a trajectory (with the invalid-action penalty if configured)."""
        n_invalid = sum(not s.valid for s in traj.steps)
        return outcome_reward(
            traj.won,
            traj.score,
            n_invalid,
            env=self.env,
            mode=self.outcome.mode,
            invalid_penalty=self.outcome.invalid_penalty,
        )

    def process_steps(self, traj: Any) -> list[float]:
        """r_p of every step, in order."""
        if self.trajectory_process is not None:
            return self.trajectory_process.step_rewards([traj])[0]
        return [
            float(self.process(s.progress_before, s.progress_after, s.action, s.valid, s.info))
            for s in traj.steps
        ]

    def step_rewards(self, traj: Any, signal: Signal) -> list[float]:
        """The per-step rewards the base algorithm sees under ``signal``.

        >>> from types import SimpleNamespace as NS
        >>> p0, p1 = {"subgoals_done": 0, "subgoals_total": 2}, {"subgoals_done": 1, "subgoals_total": 2}
        >>> steps = [NS(progress_before=p0, progress_after=p1, action="go to desk 1", valid=True, info={}),
        ...          NS(progress_before=p1, progress_after=p1, action="look", valid=True, info={})]
        >>> rm = RewardModel.build("alfworld")
        >>> traj = NS(steps=steps, won=False, score=0.0)
        >>> rm.step_rewards(traj, "outcome"), rm.step_rewards(traj, "process"), rm.step_rewards(traj, "mix")
        ([0.0, 0.0], [0.5, 0.0], [0.25, 0.0])
        """
        if signal not in SIGNALS:
            raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
        if not traj.steps:
            return []
        return self._signal(traj, signal, None if signal == "outcome" else self.process_steps(traj))

    def _signal(self, traj: Any, signal: Signal, process: list[float] | None) -> list[float]:
        if signal == "process":
            return list(process)
        rewards = [0.0] * len(traj.steps) if signal == "outcome" else [self.mix_lambda * r for r in process]
        rewards[-1] += self.outcome_return(traj)
        return rewards

    def batch_rewards(self, trajs: Sequence[Any], signal: Signal) -> list[list[float]]:
        if self.trajectory_process is None or signal == "outcome":
            return [self.step_rewards(t, signal) for t in trajs]
        if signal not in SIGNALS:
            raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
        process = self.trajectory_process.step_rewards(trajs)  # one batched pass over every step
        return [self._signal(t, signal, p) if t.steps else [] for t, p in zip(trajs, process, strict=True)]
