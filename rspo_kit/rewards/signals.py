"""Per-step reward vectors of a trajectory under a training signal: outcome, process or their mix.

The base algorithms consume one vector per trajectory (r_0 … r_{T-1}); the episode return is its
sum. ``outcome`` puts R_o on the last step (sparse), ``process`` is r_p per step (dense), ``mix`` is
λ·r_p per step plus R_o at the end. RSPO's swap is exactly the change of signal from ``process``
(what the explorer trained on) to ``outcome`` (what the actor sees) for the explorer's trajectories.

Trajectories are duck-typed: ``.steps`` (each with ``progress_before``, ``progress_after``,
``action``, ``valid``, ``info``), ``.won``, ``.score`` and ``.env``/``env`` given explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from rspo_kit.rewards.outcome import OutcomeConfig, outcome_reward
from rspo_kit.rewards.process import ProcessReward, misalign, process_reward

Signal = Literal["outcome", "process", "mix"]
SIGNALS: tuple[str, ...] = get_args(Signal)


@dataclass(frozen=True)
class RewardModel:
    """The outcome and process rewards of one env, and the mixing weight λ."""

    env: str
    outcome: OutcomeConfig
    process: ProcessReward
    mix_lambda: float = 0.5

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
        n = len(traj.steps)
        if n == 0:
            return []
        if signal == "process":
            return self.process_steps(traj)
        rewards = (
            [0.0] * n if signal == "outcome" else [self.mix_lambda * r for r in self.process_steps(traj)]
        )
        rewards[-1] += self.outcome_return(traj)
        return rewards

    def batch_rewards(self, trajs: Sequence[Any], signal: Signal) -> list[list[float]]:
        return [self.step_rewards(t, signal) for t in trajs]
