"""What the quickstart's notebook (notebooks/00_quickstart.ipynb) shows of its runs, from their metrics
and final episodes: A's success curves against either budget, RSPO's loops one row each, and the final
sampled success of every run with the paired differences at both budgets.

``success_curves``, ``loop_table`` and ``summarize`` are the tables; ``curve_text``, ``loop_text`` and
``Summary.text`` say what they show in their own numbers. ``paired_difference`` is one run minus
another task by task, as ``rspo_kit.experiments.pairing`` pairs final episodes: the runs evaluate the
same tasks with the same seed, so the pairs share a task and its sampling seed. The runs themselves
are ``rspo_kit.studies.quickstart``'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rspo_kit.experiments.intervals import mean_ci
from rspo_kit.experiments.tables import value_text
from rspo_kit.records import load_episodes
from rspo_kit.studies.quickstart import (
    ACTOR_UPDATES,
    BUDGET_RUNS,
    CONTRASTS,
    ENV_STEPS,
    LABELS,
    PLAIN_EQUAL_STEPS,
    ROLLOUT_SUCCESS,
    difference_name,
    number,
    spent,
)


# ---------------------------------------------------------------------------------------- tables
def success_curves(metrics: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """A's sampled success in its training rollouts, one row per (run, iteration): columns ``run``,
    ``iteration``, ``actor_updates``, ``env_steps`` (actor and explorer, so far), ``rollout_success``.
    Where ``PLAIN_EQUAL_STEPS`` is among ``metrics`` it stands for plain (it is plain's run, continued):
    its rows are plain's curve to RSPO's env steps."""
    metrics = dict(metrics)
    if PLAIN_EQUAL_STEPS in metrics:
        metrics["plain"] = metrics.pop(PLAIN_EQUAL_STEPS)
    frames = []
    for run, m in metrics.items():
        rows = m.dropna(subset=[ROLLOUT_SUCCESS]) if ROLLOUT_SUCCESS in m else m.iloc[:0]
        frames.append(
            pd.DataFrame(
                {
                    "run": run,
                    "iteration": rows["iteration"].astype(int).to_numpy(),
                    "actor_updates": rows[ACTOR_UPDATES].astype(int).to_numpy() if len(rows) else [],
                    "env_steps": rows[ENV_STEPS].astype(float).to_numpy() if len(rows) else [],
                    "rollout_success": rows[ROLLOUT_SUCCESS].astype(float).to_numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


BUDGET_AXES = {"actor_updates": "updates of A", "env_steps": "env steps (actor + explorer)"}


def curve_panels(curves: pd.DataFrame) -> pd.DataFrame:
    """``success_curves`` in long form for a figure of two panels, the same runs in each: columns
    ``run``, ``budget`` (``BUDGET_AXES``' labels), ``spent`` and ``rollout_success``."""
    long = curves.melt(
        id_vars=["run", "rollout_success"],
        value_vars=list(BUDGET_AXES),
        var_name="budget",
        value_name="spent",
    )
    long["budget"] = long["budget"].map(BUDGET_AXES)
    return long[["run", "budget", "spent", "rollout_success"]]


def _count(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless one: ``_count(1, "update")`` is "1 update"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def curve_text(curves: pd.DataFrame, window: int = 3) -> str:
    """What the success figure shows, in its own numbers: one line per run (its updates of A, env
    steps, and mean sampled success over its first and its last ``window`` iterations: one iteration's
    episodes are too few to read alone)."""
    lines = []
    for run, c in curves.groupby("run", sort=False):
        s = c["rollout_success"]
        w = max(1, min(window, len(s)))
        updates = int(c["actor_updates"].iloc[-1]) if len(c) else 0
        steps = float(c["env_steps"].iloc[-1]) if len(c) else math.nan
        lines.append(
            f"- {LABELS.get(run, run)}: {_count(updates, 'update')} of A, {steps:,.0f} env steps; sampled "
            f"success {100 * s.head(w).mean():.0f}% over its first {_count(w, 'iteration')}, "
            f"{100 * s.tail(w).mean():.0f}% over its last {w}."
        )
    return "\n".join(lines)


LOOP_COLUMNS = {
    "explorer/dense_before": "B_dense_before",
    "explorer/dense_after": "B_dense_after",
    "explorer/success_before": "B_success_before",
    "swap/collect_success": "collection_success",
    "swap/replayed": "drawn",
    "swap/drawn_success_share": "drawn_won_share",
    "swap/drawn_outcome_mean": "drawn_outcome_mean",
    "swap/drawn_advantage_mean": "drawn_advantage_mean",
    ROLLOUT_SUCCESS: "A_success",
}


def loop_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """RSPO's loops, one row each, the numbers of its printed lines: A's updates and env steps so far,
    B's dense return and success before its k steps and its dense return after them (its collection),
    the collection's success, the trajectories reward-based sampling drew over A's k updates (count,
    share won, mean outcome, mean stored advantage), A's success in its on-policy rollouts."""
    columns = ["loop", "actor_updates", "env_steps", *LOOP_COLUMNS.values()]
    if "explorer/dense_before" not in metrics:  # a run without the paper's loop
        return pd.DataFrame(columns=columns)
    rows = metrics.dropna(subset=["explorer/dense_after"])
    out = pd.DataFrame(
        {
            "loop": rows["iteration"].astype(int),
            "actor_updates": rows[ACTOR_UPDATES].astype(int),
            "env_steps": rows[ENV_STEPS].astype(int),
        }
    )
    for key, name in LOOP_COLUMNS.items():
        out[name] = rows[key].astype(float) if key in rows else math.nan
    out["drawn"] = out["drawn"].astype(int)
    return out.reset_index(drop=True)[columns]


def loop_text(loops: pd.DataFrame) -> str:
    """What the loop table shows, in its own numbers (one paragraph)."""
    if loops.empty:
        return "RSPO ran no loop."
    rises = int((loops["B_dense_after"] > loops["B_dense_before"]).sum())
    return (
        f"Over RSPO's {_count(len(loops), 'loop')}, B's dense return rose in {rises} "
        f"(mean {loops['B_dense_before'].mean():.2f} → {loops['B_dense_after'].mean():.2f}); its "
        f"collections won {100 * loops['collection_success'].mean():.0f}% of their episodes, against "
        f"{100 * loops['B_success_before'].mean():.0f}% for B = A before its steps; reward-based "
        f"sampling drew {int(loops['drawn'].sum())} trajectories for A, "
        f"{100 * loops['drawn_won_share'].mean():.0f}% of them won."
    )


# ------------------------------------------------------------------------------------ final numbers
@dataclass(frozen=True)
class PairedDifference:
    """a − b over tasks that both runs evaluated: the mean of each task's difference in success (over
    its samples) and its 95% t-interval over the tasks; the episodes only ``a`` won and only ``b`` won."""

    mean: float
    ci_low: float
    ci_high: float
    tasks: int
    only_a: int
    only_b: int


def paired_difference(a: pd.DataFrame, b: pd.DataFrame, evaluation: str) -> PairedDifference:
    """``a`` − ``b`` on ``evaluation``, task by task, from two runs' ``load_episodes`` frames.

    Episodes pair on task and sample, as ``rspo_kit.experiments.pairing.task_paired_table`` pairs them
    (runs of one seed evaluate the same tasks with the same sampling seed); a task only one run
    evaluated is left out. With one sample per task on both sides the mean is exactly a's success
    minus b's on the shared tasks.
    """
    keys = ["evaluation", "task_id", "sample"]
    a, b = (frame[frame["evaluation"] == evaluation] for frame in (a, b))
    joined = a.merge(b, on=keys, suffixes=("_a", "_b"))
    won = joined["won_a"].astype(float) - joined["won_b"].astype(float)
    per_task = won.groupby(joined["task_id"]).mean()
    mean, low, high = mean_ci(per_task.tolist())
    return PairedDifference(mean, low, high, len(per_task), int((won > 0).sum()), int((won < 0).sum()))


@dataclass(frozen=True)
class FinalSuccess:
    """One run's success on its final sampled evaluation with its 95% Wilson interval, as the trainer
    reported it, and what the run spent: updates of A and env steps."""

    success: float
    ci_low: float
    ci_high: float
    tasks: int
    actor_updates: int = 0
    env_steps: int = 0


def final_success(metrics: pd.DataFrame, evaluation: str) -> FinalSuccess:
    """The last row's ``<evaluation>/success`` and interval (NaN where the run did not evaluate it)."""
    last = metrics.iloc[-1] if len(metrics) else pd.Series(dtype=float)

    def get(key: str) -> float:
        return number(last, f"{evaluation}/{key}")

    tasks = get("tasks")
    updates, steps = spent(metrics)
    return FinalSuccess(
        get("success"), get("ci_low"), get("ci_high"), 0 if math.isnan(tasks) else int(tasks), updates, steps
    )


@dataclass
class Summary:
    """The measured final numbers: each run's ``FinalSuccess``, and a − b task by task for each of
    ``CONTRASTS`` whose runs both exist, keyed by (budget, a, b)."""

    finals: dict[str, FinalSuccess]
    differences: dict[tuple[str, str, str], PairedDifference] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """One table per budget in one frame, in percent: a row per run (its updates of A, env steps,
        success with its Wilson interval over its episodes), then a row per difference (t-interval
        over the paired tasks)."""
        rows = []
        for budget, runs in BUDGET_RUNS.items():
            for run in (r for r in runs if r in self.finals):
                f = self.finals[run]
                interval = f"[{value_text(f.ci_low, 'percent')}, {value_text(f.ci_high, 'percent')}]"
                rows.append(
                    [budget, LABELS.get(run, run), f"{f.actor_updates}", f"{f.env_steps:,}",
                     value_text(f.success, "percent"), interval, f"{f.tasks}"]
                )  # fmt: skip
            for (b_, a, b), d in self.differences.items():
                if b_ != budget:
                    continue
                interval = (
                    f"[{value_text(d.ci_low, 'percent', True)}, {value_text(d.ci_high, 'percent', True)}]"
                )
                pairs = f"{d.tasks} paired; won only by {a} / {b}: {d.only_a} / {d.only_b}"
                label = f"{LABELS[a]} − {LABELS[b]}"
                rows.append([budget, label, "", "", value_text(d.mean, "percent", True), interval, pairs])
        columns = [
            "budget",
            "run",
            "updates of A",
            "env steps",
            "sampled success (%)",
            "95% interval",
            "tasks",
        ]
        return pd.DataFrame(rows, columns=columns)

    def text(self) -> str:
        """The tables' conclusion in their own numbers: one line per difference."""
        lines = []
        for (budget, a, b), d in self.differences.items():
            if math.isnan(d.ci_low):
                verdict = "too few paired tasks for an interval"
            elif d.ci_low > 0:
                verdict = f"the interval lies above zero: {a} measurably ahead"
            elif d.ci_high < 0:
                verdict = f"the interval lies below zero: {a} measurably behind"
            else:
                verdict = "the interval includes zero: no measurable difference on these tasks"
            lines.append(
                f"- {budget}: {LABELS[a]} − {LABELS[b]} = {value_text(d.mean, 'percent', True)} points "
                f"[{value_text(d.ci_low, 'percent', True)}, {value_text(d.ci_high, 'percent', True)}] "
                f"over {d.tasks} tasks; {verdict}."
            )
        return "\n".join(lines)

    def record(self) -> dict[str, Any]:
        """The numbers to ``record``: ``<run>_success`` and ``<run>_ci`` ([low, high]) per run,
        ``actor_updates`` and ``env_steps`` (run -> count), and per difference ``<a>_minus_<b>``,
        ``<a>_minus_<b>_ci`` and ``<a>_minus_<b>_tasks``."""
        out: dict[str, Any] = {"actor_updates": {}, "env_steps": {}}
        for run, f in self.finals.items():
            out[f"{run}_success"], out[f"{run}_ci"] = f.success, [f.ci_low, f.ci_high]
            out["actor_updates"][run], out["env_steps"][run] = f.actor_updates, f.env_steps
        for (_, a, b), d in self.differences.items():
            name = difference_name(a, b)
            out[name], out[f"{name}_ci"], out[f"{name}_tasks"] = d.mean, [d.ci_low, d.ci_high], d.tasks
        return out


def summarize(
    run_dirs: Mapping[str, str | Path], metrics: Mapping[str, pd.DataFrame], evaluation: str
) -> Summary:
    """``Summary`` of the runs: each run's final sampled success on ``evaluation`` from its metrics,
    and each of ``CONTRASTS`` task by task from the runs' final episodes (``final_episodes.parquet``)."""
    finals = {run: final_success(m, evaluation) for run, m in metrics.items()}
    episodes: dict[str, pd.DataFrame] = {}

    def of(run: str) -> pd.DataFrame:
        if run not in episodes:
            episodes[run] = load_episodes(run_dirs[run])
        return episodes[run]

    differences = {
        (budget, a, b): paired_difference(of(a), of(b), evaluation)
        for budget, a, b in CONTRASTS
        if a in run_dirs and b in run_dirs
    }
    return Summary(finals, differences)
