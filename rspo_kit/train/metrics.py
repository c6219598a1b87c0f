"""What an iteration records besides its evaluation: the metrics of its rollouts and updates, and its
per-turn table (``turns/iter_<k>.parquet``, ``rspo_kit.records.turn_table``).

``rollout_metrics`` is a rollout's ``<prefix>/*`` (``rollout``, ``explorer_rollout``); ``as_explorer``
names the explorer's update metrics as its own; ``mean_metrics`` averages a loop's k updates; the
tables hold each trajectory's steps with the rewards and advantages its update used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from rspo_kit.policy.rollout import Trajectory
from rspo_kit.records import turn_table
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.stats import repeated_states
from rspo_kit.train.update import UpdateBatch


def rollout_metrics(prefix: str, trajs: Sequence[Trajectory], rewards: RewardModel) -> dict[str, float]:
    """A rollout's metrics under ``prefix``: success, score, length, invalid actions, env steps, crashes,
    process and outcome returns, and states visited again."""
    steps = sum(t.env_steps for t in trajs)
    n = max(1, len(trajs))
    process = [sum(rewards.process_steps(t)) for t in trajs]
    return {
        f"{prefix}/success": sum(t.won for t in trajs) / n,
        f"{prefix}/score": sum(t.score for t in trajs) / n,
        f"{prefix}/episode_steps": steps / n,
        f"{prefix}/invalid_share": sum(not s.valid for t in trajs for s in t.steps) / max(1, steps),
        f"{prefix}/env_steps": float(steps),
        f"{prefix}/crashed": float(sum(t.crashed for t in trajs)),
        f"{prefix}/process_return": sum(process) / n,
        f"{prefix}/outcome_return": sum(rewards.outcome_return(t) for t in trajs) / n,
        # the paper's Table 6: states visited again within a window of the episode's last steps
        f"{prefix}/repeated_states": float(repeated_states(trajs)),
        f"{prefix}/repeated_state_share": repeated_states(trajs) / max(1, steps),
    }


def as_explorer(metrics: Mapping[str, float]) -> dict[str, float]:
    """The explorer's update metrics under its own names: ``explorer/loss/*``, ``perf/explorer_update_*``."""
    return {
        f"perf/explorer_{key[5:]}" if key.startswith("perf/") else f"explorer/{key}": v
        for key, v in metrics.items()
    }


def mean_metrics(updates: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each key's mean over the loop's updates that report it (NaN-free where any did)."""
    out: dict[str, list[float]] = {}
    for m in updates:
        for key, v in m.items():
            out.setdefault(key, []).append(v)
    return {key: sum(v) / len(v) for key, v in out.items()}


def loop_table(rewards: RewardModel, k: int, batches: Mapping[str, list[UpdateBatch]]) -> pd.DataFrame | None:
    """A loop's per-turn table: A's k batches (role actor or replay), B's k dense batches (explorer) and
    its collection (collection), each with the rewards and advantages it carried; None without any."""
    frames, first = [], 0
    for role in ("actor", "explorer", "collection"):
        for batch in batches[role]:
            proc = rewards.batch_rewards(batch.trajs, "process")
            adv = batch.advantages.tolist() if batch.advantages is not None else None
            outcomes = [rewards.outcome_return(t) for t in batch.trajs]
            frames.append(turn_table(batch.trajs, k, proc, batch.rewards, adv, outcomes, first_id=first))
            first += len(batch.trajs)
    return pd.concat(frames, ignore_index=True) if frames else None


def iteration_table(
    rewards: RewardModel, k: int, batch: UpdateBatch, explorer: Sequence[Trajectory]
) -> pd.DataFrame:
    """An iteration's per-turn table outside the paper's loop: the actor's batch (group_mixing: mixed
    with replayed trajectories) and the explorer's fresh rollout, where there is one."""
    # the advantages the update used (PPO's: over its critic's values at the time); the explorer's
    # fresh rollout has none yet (it trains on it next iteration)
    mixed = batch.trajs
    adv = batch.advantages.tolist() if batch.advantages is not None else None
    outcome = rewards.outcome_return
    frames = [
        turn_table(
            mixed,
            k,
            rewards.batch_rewards(mixed, "process"),
            batch.rewards,
            adv,
            [outcome(t) for t in mixed],
        )
    ]
    if explorer:
        proc = rewards.batch_rewards(explorer, "process")
        outcomes = [outcome(t) for t in explorer]
        frames.append(turn_table(explorer, k, proc, proc, None, outcomes, first_id=len(mixed)))
    return pd.concat(frames, ignore_index=True)
