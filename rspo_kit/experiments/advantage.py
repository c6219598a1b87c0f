"""Where a run's positive advantage goes: to steps of won episodes, or to steps of failed ones.

On a 0/1 outcome, GRPO never gives a failed episode's step a positive advantage (a failure's return is
never above its group's mean), so every positive update pushes towards what won. A dense reward in the
return (``process`` only, or ``mix``) hands positive advantages to failures that got partway, and this
table measures how much of the update goes there. It reads the per-turn tables a run records
(``turns/iter_*.parquet``, the actor's rows: the update's own advantages) and gives per run:

- ``failed_positive_share``: the share of the positive advantage mass, Σ max(A, 0) over steps, that lies
  on steps of failed episodes;
- ``won_step_advantage`` / ``failed_step_advantage``: the mean advantage of a step of a won / failed
  episode;
- ``failed_episodes_positive``: the share of failed episodes whose steps have a positive mean advantage;
- ``steps``: the actor steps counted.

``python -m rspo_kit.experiments.report OUT --advantage-share`` prints it for the finished cells of a
live sweep folder (archives keep no turn tables).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from rspo_kit.records import load_turns

EPISODE = ["iteration", "group_id", "traj_id"]  # one trajectory: traj_id is unique within its iteration


@dataclass(frozen=True)
class AdvantageShare:
    failed_positive_share: float
    won_step_advantage: float
    failed_step_advantage: float
    failed_episodes_positive: float
    steps: int


def advantage_share(turns: pd.DataFrame, role: str = "actor") -> AdvantageShare | None:
    """The advantage shares of one run's turn table (rows of ``role`` only).

    None where the rows carry no advantages (an update that computes them inside itself, e.g. PPO's
    critic in runs that did not record them).
    """
    rows = turns[turns["role"] == role]
    if rows.empty or rows["advantage"].isna().all():
        return None
    advantage = rows["advantage"].astype(float)
    won = rows["won"].astype(bool)
    positive = advantage.clip(lower=0.0)
    episodes = (
        rows.assign(advantage=advantage)
        .groupby(EPISODE)
        .agg(advantage=("advantage", "mean"), won=("won", "first"))
    )
    failed_episodes = episodes[~episodes["won"].astype(bool)]
    total = positive.sum()
    return AdvantageShare(
        failed_positive_share=float(positive[~won].sum() / total) if total > 0 else 0.0,
        won_step_advantage=float(advantage[won].mean()),
        failed_step_advantage=float(advantage[~won].mean()),
        failed_episodes_positive=float((failed_episodes["advantage"] > 0).mean()),
        steps=len(rows),
    )


def advantage_share_table(out_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """One row per finished cell (``results.json``) with turn tables in the sweep folders, by cell name.

    Cells whose tables carry no advantages are left out.
    """
    rows = []
    for out in map(Path, out_dirs):
        for cell in sorted(p for p in out.iterdir() if p.is_dir()):
            if not (cell / "results.json").exists() or not (cell / "turns").is_dir():
                continue
            share = advantage_share(load_turns(cell))
            if share is not None:
                rows.append({"cell": cell.name, **asdict(share)})
    return pd.DataFrame(rows, columns=["cell", *AdvantageShare.__dataclass_fields__])


def markdown(table: pd.DataFrame) -> str:
    """The table as Markdown, shares and advantages to three decimals."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for row in table.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def advantage_share_report(out_dirs: Iterable[str | Path]) -> str:
    """The Markdown section ``report --advantage-share`` prints."""
    out_dirs = list(out_dirs)
    table = advantage_share_table(out_dirs)
    if table.empty:
        raise FileNotFoundError(
            f"no finished cell with recorded advantages in its turn tables under {', '.join(map(str, out_dirs))}"
            " (archives keep no turn tables: read the live sweep folder)"
        )
    return "Where the positive advantage goes (actor steps, whole run):\n\n" + markdown(table)
