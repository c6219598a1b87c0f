"""The paper's Table 6 for a sweep: how often the actor revisits a state, at three points of training.

The paper counts "identical states visited within a fixed window" at 50, 100 and 145 of its ~150
training steps (GRPO 1,011 / 1,084 / 1,167 against RSPO's 917 / 889 / 623): an agent that goes in
circles scores high. Every run logs the same measure for the actor's rollouts
(``rollout/repeated_state_share``: the share of steps whose state already occurred within the
episode's last ``rspo_kit.swap.stats.REPEAT_WINDOW`` steps, a share so that batches and episode
lengths compare). ``repeats_at_points`` reads it at a third, two thirds and the end of A's updates,
the paper's three points; the report pairs the three columns by seed like any metric
(``report OUT --metrics repeats_third_share repeats_two_thirds_share repeats_end_share --paired
variant=rspo,plain``).

Points are counted in updates of A (``budget/actor_updates`` where the run logs it), so a plain run
and a run of the paper's loop are read at the same update of A, the paper's accounting. A row of the
paper's loop is one loop, its share over the rollouts of A's k updates in it; the point reads the
row whose updates include it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from rspo_kit.experiments.training_statistics import finished_cells_table

SHARE = "rollout/repeated_state_share"
# column name -> the fraction of A's updates it is read at
POINTS = {"repeats_third_share": 1 / 3, "repeats_two_thirds_share": 2 / 3, "repeats_end_share": 1.0}


def repeats_at_points(metrics: pd.DataFrame, points: Mapping[str, float] = POINTS) -> dict[str, float]:
    """The actor's repeated-state share at each fraction of its updates in ``points`` (NaN where the
    run logged none): the row of the first update of A at or past ``ceil(fraction · updates)``.

    >>> m = pd.DataFrame({"iteration": [0, 1, 2, 3, 4], "budget/actor_updates": [0, 3, 6, 9, 12],
    ...     "rollout/repeated_state_share": [None, 0.8, 0.5, 0.4, 0.3]})
    >>> repeats_at_points(m)  # updates 4, 8 and 12 fall in the loops that end at 6, 9 and 12
    {'repeats_third_share': 0.5, 'repeats_two_thirds_share': 0.4, 'repeats_end_share': 0.3}
    >>> plain = pd.DataFrame({"iteration": [0, 1, 2, 3], "rollout/repeated_state_share": [None, 0.9, 0.7, 0.6]})
    >>> repeats_at_points(plain)
    {'repeats_third_share': 0.9, 'repeats_two_thirds_share': 0.7, 'repeats_end_share': 0.6}
    """
    nothing = {name: math.nan for name in points}
    if SHARE not in metrics or "iteration" not in metrics:
        return nothing
    rows = metrics[(metrics["iteration"] > 0) & metrics[SHARE].notna()]
    if not len(rows):
        return nothing
    if "budget/actor_updates" in rows:
        updates = rows["budget/actor_updates"].astype(float).to_numpy()
    else:  # one update of A an iteration
        updates = rows["iteration"].astype(float).to_numpy()
    shares = rows[SHARE].astype(float).to_numpy()
    total = updates.max()
    found = {}
    for name, fraction in points.items():
        target = max(1.0, math.ceil(fraction * total - 1e-9))
        at = next(i for i, u in enumerate(updates) if u >= target)
        found[name] = float(shares[at])
    return found


def sweep_state_repeats(
    out_dir: str | Path,
    loaded: tuple[dict, list[dict]] | None = None,
    folders: Mapping[str, Path] | None = None,
) -> pd.DataFrame:
    """One row per finished cell: its name, grid values and ``repeats_at_points`` of its run
    (``loaded`` and ``folders`` as ``training_statistics.finished_cells_table`` takes them)."""
    return finished_cells_table(out_dir, repeats_at_points, loaded, folders)
