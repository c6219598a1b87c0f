"""How each run of a sweep spent its budget and what its swap did, from its ``metrics.jsonl``.

``run_statistics`` reads one run: its updates of A, the explorer's share of the env steps, the
sampled success of the actor's rollouts early and late, the swap's statistics and the explorer's
edge over the actor. ``sweep_statistics`` is one row per finished cell, ``running_statistics`` the
same so far for the cells still running (to tune on). Where a variant loses, look here first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from rspo_kit.experiments.aggregation import load_sweep
from rspo_kit.experiments.tables import cells_frame
from rspo_kit.records import load_metrics

# run_statistics: name -> (metrics column, how its values over the iterations are combined)
SWAP_STATISTICS = {
    "explorer_success": ("swap/explorer_success", "mean"),
    "rescued_groups": ("swap/rescued_groups", "sum"),
    "zero_var_before_share": ("swap/zero_var_groups_before", "mean"),
    "zero_var_after_share": ("swap/zero_var_groups_after", "mean"),
    "tau": ("swap/process_outcome_tau", "mean"),
    "hacking_rate": ("swap/explorer_hacking_rate", "mean"),
    "is_weight": ("is/mean", "mean"),
    "is_clipped_share": ("is/clipped_frac", "mean"),
    "approx_kl": ("loss/approx_kl", "mean"),
    "explorer_approx_kl": ("explorer/loss/approx_kl", "mean"),  # how far its dense step moves it
    # the paper's loop, per loop: B's dense return before and after its k steps, its collection's
    # success, the won share of what A drew, and the shifted clip on the replayed steps
    "dense_before": ("explorer/dense_before", "mean"),
    "dense_after": ("explorer/dense_after", "mean"),
    "collect_success": ("swap/collect_success", "mean"),
    "drawn_success_share": ("swap/drawn_success_share", "mean"),
    "offpolicy_clip_frac": ("offpolicy/clip_frac", "mean"),
    "offpolicy_grad_share": ("offpolicy/grad_share", "mean"),
}
# every run_statistics column, in the table's order: the explorer's edge (its success minus the
# actor's, same tasks and iterations) beside its success, and the same in the outcome the run trains
# on where that is not the success (WebShop's score / 100 with OUTCOME_MODE "score")
STATISTICS = (
    *("actor_updates", "explorer_steps_share", "rollout_start_success", "rollout_end_success"),
    *("rollout_start_outcome", "rollout_end_outcome"),
    *("explorer_success", "explorer_minus_actor_success"),
    *("explorer_outcome", "explorer_minus_actor_outcome"),
    *(k for k in SWAP_STATISTICS if k != "explorer_success"),
)


def run_statistics(metrics: pd.DataFrame, window: int = 10) -> dict[str, float]:
    """How a run spent its budget and what its swap did, from its per-iteration metrics.

    Actor updates, the explorer's share of the env steps, the sampled success of the actor's own
    rollouts over the first and the last ``window`` iterations, the swap statistics over all
    iterations (``SWAP_STATISTICS``: means, rescued groups summed) and the explorer's success minus
    the actor's (mean over the iterations with both); NaN where the run has none. A run of the paper's
    loop counts both from its ``budget/*`` columns (k updates of A a loop), and its explorer's success
    is its collection's (``swap/collect_success``). The ``*_outcome``
    columns repeat the rollout and explorer numbers in the outcome reward the run trains on
    (``outcome_return``), and are NaN where that is the success itself (same value every iteration).

    >>> m = pd.DataFrame({"iteration": [0, 1, 2], "rollout/cumulative_env_steps": [0, 90, 180],
    ...     "rollout/env_steps": [None, 60, 60], "rollout/success": [None, 0.25, 0.5],
    ...     "swap/rescued_groups": [None, 1, 0], "swap/explorer_success": [None, 0.5, 0.25]})
    >>> s = run_statistics(m, window=1)
    >>> s["actor_updates"], round(s["explorer_steps_share"], 3), s["rollout_start_success"], s["rollout_end_success"]
    (2.0, 0.333, 0.25, 0.5)
    >>> s["rescued_groups"], s["explorer_success"], s["explorer_minus_actor_success"], math.isnan(s["tau"])
    (1.0, 0.375, 0.0, True)
    """
    steps = metrics[metrics["iteration"] > 0]

    def column(name: str) -> pd.Series:
        return steps[name].dropna() if name in steps else pd.Series(dtype=float)

    total = metrics["rollout/cumulative_env_steps"].max() if "rollout/cumulative_env_steps" in metrics else 0
    actor = column("rollout/env_steps").sum()
    updates = float(len(steps))
    if "budget/actor_updates" in metrics:  # counted per role: the paper's loop, and any run that logs them
        updates = float(metrics["budget/actor_updates"].max())
        total = metrics["budget/env_steps"].max()
        actor = metrics["budget/env_steps_actor"].max()
    success = column("rollout/success")
    stats = {
        "actor_updates": updates,
        "explorer_steps_share": float(1 - actor / total) if total else math.nan,
        "rollout_start_success": float(success.head(window).mean()) if len(success) else math.nan,
        "rollout_end_success": float(success.tail(window).mean()) if len(success) else math.nan,
    }
    for name, (key, how) in SWAP_STATISTICS.items():
        values = column(key)
        stats[name] = float(getattr(values, how)()) if len(values) else math.nan
    if "swap/explorer_success" not in steps and "swap/collect_success" in steps:
        stats["explorer_success"] = stats["collect_success"]  # the paper's loop: B's collection
    explorer_success = column(
        "swap/explorer_success" if "swap/explorer_success" in steps else "swap/collect_success"
    )
    stats["explorer_minus_actor_success"] = _mean_difference(explorer_success, success)
    outcome = column("rollout/outcome_return")
    if len(outcome) and not (outcome - success.reindex(outcome.index)).abs().max() < 1e-9:
        explorer = column("explorer_rollout/outcome_return")
        stats |= {
            "rollout_start_outcome": float(outcome.head(window).mean()),
            "rollout_end_outcome": float(outcome.tail(window).mean()),
            "explorer_outcome": float(explorer.mean()) if len(explorer) else math.nan,
            "explorer_minus_actor_outcome": _mean_difference(explorer, outcome),
        }
    return {k: stats.get(k, math.nan) for k in STATISTICS}


def _mean_difference(explorer: pd.Series, actor: pd.Series) -> float:
    """The explorer's value minus the actor's, averaged over the iterations that have both."""
    edge = (explorer - actor.reindex(explorer.index)).dropna()
    return float(edge.mean()) if len(edge) else math.nan


def finished_cells_table(
    out_dir: str | Path,
    of_run: Callable[[pd.DataFrame], Mapping[str, float]],
    loaded: tuple[dict, list[dict]] | None = None,
    folders: Mapping[str, Path] | None = None,
) -> pd.DataFrame:
    """One row per finished cell of a sweep: its name, grid values and ``of_run`` of its run's
    per-iteration metrics (``loaded``: what ``load_sweep(out_dir)`` returned, if the caller has it
    already; ``folders``: each cell's run folder where it is not ``out_dir / cell``, as
    ``pooled_sweep`` returns them)."""
    manifest, rows = loaded or load_sweep(out_dir)
    folders = folders or {name: Path(out_dir) / name for name in manifest["cells"]}
    return cells_frame(
        [
            {"cell": r["cell"], **manifest["cells"][r["cell"]]} | of_run(load_metrics(folders[r["cell"]]))
            for r in rows
        ],
        manifest["keys"],
    )


def sweep_statistics(
    out_dir: str | Path,
    loaded: tuple[dict, list[dict]] | None = None,
    folders: Mapping[str, Path] | None = None,
) -> pd.DataFrame:
    """One row per finished cell of a sweep: its name, grid values and ``run_statistics`` of its run
    (``loaded`` and ``folders`` as ``finished_cells_table`` takes them)."""
    return finished_cells_table(out_dir, run_statistics, loaded, folders)


def statistics_columns(stats: pd.DataFrame) -> list[str]:
    """The ``run_statistics`` columns that some run of ``stats`` has (plain runs have no swap)."""
    return [k for k in STATISTICS if k in stats and stats[k].notna().any()]


def running_statistics(folders: Mapping[str, Path], manifest: dict, finished: set[str]) -> pd.DataFrame:
    """``run_statistics`` so far of the cells that have started and not finished (tuning mid-run)."""
    rows = []
    for name, params in manifest["cells"].items():
        if name in finished:
            continue
        try:
            metrics = load_metrics(folders[name])
        except (FileNotFoundError, ValueError):  # not started, or caught halfway through writing a row
            continue
        if "iteration" not in metrics:  # has logged nothing yet
            continue
        rows.append({"cell": name, **params} | run_statistics(metrics))
    return cells_frame(rows, manifest["keys"])
