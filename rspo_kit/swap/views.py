"""One loop of the paper's RSPO as tables, for notebooks and widgets (``rspo_kit.swap.loop.LoopRecord``).

- ``explorer_steps``: B's dense reward and success over its k steps and at the collection (does B's
  dense reward rise?);
- ``relabel_table``: B's collection trajectory by trajectory: the dense return B chased, the outcome
  it is relabelled with, the stored A_off, and which of A's steps drew it;
- ``draws``: what each of A's k steps drew from D;
- ``clip_windows``: where GePPO's shifted clip put each replayed step's window (π_B, π_old, c).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.loop import LoopRecord


def _dense(trajs: Sequence[Any], rewards: RewardModel) -> list[float]:
    return [sum(rewards.process_steps(t)) for t in trajs]


def explorer_steps(record: LoopRecord, rewards: RewardModel) -> pd.DataFrame:
    """One row per rollout of B: its k dense steps (``step`` 1..k, each rollout before that update)
    and the collection after them; mean dense return, success, episodes."""
    rows = []
    for j, batch in enumerate(record.explorer, 1):
        dense = _dense(batch.trajs, rewards)
        won = [t.won for t in batch.trajs]
        rows.append(
            {
                "rollout": f"step {j}",
                "episodes": len(won),
                "dense_return": sum(dense) / len(dense),
                "success": sum(won) / len(won),
            }
        )
    collected = [e.traj for e in record.collection]
    if collected:
        dense = _dense(collected, rewards)
        rows.append(
            {
                "rollout": "collection",
                "episodes": len(collected),
                "dense_return": sum(dense) / len(dense),
                "success": sum(t.won for t in collected) / len(collected),
            }
        )
    return pd.DataFrame(rows, columns=["rollout", "episodes", "dense_return", "success"])


def relabel_table(record: LoopRecord, rewards: RewardModel) -> pd.DataFrame:
    """B's collection as D stored it, one row per trajectory: ``dense_return`` (what B was trained to
    chase), ``outcome`` (the label after the swap), ``advantage`` (its stored A_off, the mean over its
    steps; NaN where X computes it at update time), ``drawn_by`` (the 1-based step of A that replayed
    it, 0: none)."""
    drawn_by = {id(e): j for j, d in enumerate(record.drawn, 1) for e in d}
    rows = [
        {
            "task_id": e.traj.task_id,
            "group": e.group,
            "steps": len(e.traj.steps),
            "dense_return": sum(rewards.process_steps(e.traj)),
            "outcome": e.outcome,
            "won": bool(e.traj.won),
            "advantage": e.advantage if e.advantages is not None else float("nan"),
            "drawn_by": drawn_by.get(id(e), 0),
        }
        for e in record.collection
    ]
    columns = ["task_id", "group", "steps", "dense_return", "outcome", "won", "advantage", "drawn_by"]
    return pd.DataFrame(rows, columns=columns)


def draws(record: LoopRecord) -> pd.DataFrame:
    """One row per update of A: how many trajectories D_off held, their mean outcome, success share and
    mean stored advantage, beside the on-policy part's success."""
    rows = []
    for j, (batch, drawn) in enumerate(zip(record.actor, record.drawn, strict=True), 1):
        on = [t for t, off in zip(batch.trajs, batch.offpolicy, strict=True) if not off]
        adv = [a for e in drawn if e.advantages for a in e.advantages]
        rows.append(
            {
                "actor_step": j,
                "on_policy": len(on),
                "on_policy_success": sum(t.won for t in on) / max(1, len(on)),
                "replayed": len(drawn),
                "replayed_outcome": sum(e.outcome for e in drawn) / len(drawn) if drawn else float("nan"),
                "replayed_success": sum(e.traj.won for e in drawn) / len(drawn) if drawn else float("nan"),
                "replayed_advantage": sum(adv) / len(adv) if adv else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def clip_windows(batch: Any, clip_low: float = 0.2, clip_high: float = 0.2) -> pd.DataFrame:
    """Where the shifted clip put each replayed step of an updated batch (``UpdateBatch`` after
    ``update``, which records ``clip_centers``): the chosen action's π_B (the explorer's behaviour
    probability), π_old = c·π_B (the actor before the update), the centre c and the window
    [c − ε_low, c + ε_high] on the ratio π_θ/π_B, beside PPO's [1 − ε_low, 1 + ε_high]. One row per
    replayed step (its first unit: choice mode's one candidate, free mode's first token)."""
    import math

    if batch.clip_centers is None:
        raise ValueError("the batch has no clip centres: pass one that went through update()")
    rows, i = [], 0
    for n, (t, off) in enumerate(zip(batch.trajs, batch.offpolicy, strict=True)):
        for j, step in enumerate(t.steps):
            if off:
                c = float(batch.clip_centers[i][0])
                pi_b = math.exp(step.token_logprobs[0] if step.candidates is None else step.logprob)
                rows.append(
                    {
                        "trajectory": n,
                        "step": j,
                        "action": step.action,
                        "pi_B": pi_b,
                        "pi_old": c * pi_b,
                        "center": c,
                        "low": c - clip_low,
                        "high": c + clip_high,
                    }
                )
            i += 1
    return pd.DataFrame(
        rows, columns=["trajectory", "step", "action", "pi_B", "pi_old", "center", "low", "high"]
    )
