"""The quickstart's comparison: plain GRPO, RSPO-GRPO and GRPO on the process reward alone, trained from
one committed start at one budget of env steps, and what the swap did (notebooks/00_quickstart.ipynb).

The notebook stays thin: it calls these functions and draws their tables. ``Quickstart`` holds the
notebook's parameters and builds each variant's ``RunConfig`` from the chain testbed's protocol
(``preset("chain-4k")``); ``run_variants`` trains the three one after another with a progress line per
iteration and keeps one ``on_swap`` event in which the swap rescued a group; ``success_curves``,
``rescue_table``, ``rescued_group`` and ``summarize`` are what the notebook shows.
``paired_difference`` is RSPO − another variant task by task, as ``rspo_kit.experiments.report`` pairs
final episodes: the runs evaluate the same tasks with the same seed, so the pairs share a task and its
sampling seed.

``python -m rspo_kit.experiments.quickstart OUTPUT [-p NAME VALUE]...`` (``make demo``) runs the notebook
headless with papermill, its printed lines (a progress line per iteration, the tables' text) streamed
to the terminal, then prints what it recorded.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from rspo_kit.algos.grpo import grpo_advantages
from rspo_kit.experiments.report import value_text
from rspo_kit.experiments.sweep import mean_ci
from rspo_kit.paths import repository_path
from rspo_kit.records import load_episodes
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.replay import group_outcomes
from rspo_kit.swap.stats import _zero_variance  # the rule swap/rescued_groups counts by
from rspo_kit.train.config import RunConfig, preset
from rspo_kit.train.trainer import run_rewards

# the variants the quickstart compares, in the order it shows them
VARIANTS = ("plain", "rspo", "process")
LABELS = {"plain": "plain GRPO", "rspo": "RSPO-GRPO", "process": "GRPO on process reward"}
# the evaluation the summary compares: sampled actions (RL optimises the sampled policy; the greedy
# policy of the chain testbed's start already copies the clue almost always)
FINAL = "final_sampled/eval"
ENV_STEPS, ROLLOUT_SUCCESS = "rollout/cumulative_env_steps", "rollout/success"


@dataclass(frozen=True)
class Quickstart:
    """The quickstart's parameters; ``config(variant)`` is that variant's run.

    Every variant starts from the chain-4k protocol's committed warm start (GRPO, lr 1e-3, N=4 tasks ×
    G=8) and stops at ``budget`` env steps, actor and explorer together. The learning curve is a greedy
    evaluation on ``eval_n`` valid tasks every ``eval_every`` iterations (cheap: the greedy policy sits
    near its ceiling); at the end ``final_n`` eval tasks, greedy and sampled, one episode each.
    """

    level: str = "chain-4x2-cap8"
    eps: float = 0.5  # reward.misalign_eps: the share of the process reward that a lever pays
    sync_every: int = 1  # swap.sync_every: B <- A every k iterations (0: at the first only)
    budget: int = 3000
    seed: int = 0
    threads: int = 2
    final_n: int = 120
    eval_n: int = 20
    eval_every: int = 4
    run_dir: str = "runs/quickstart"

    def config(self, variant: str) -> RunConfig:
        """The ``RunConfig`` of ``variant`` (one of ``VARIANTS``), its run in ``run_dir/<variant>``."""
        if variant not in VARIANTS:
            raise ValueError(f"variant = {variant!r} is not allowed; choose one of {list(VARIANTS)}")
        cfg = preset("chain-4k", algo="grpo", swap=variant, seed=self.seed)
        overrides = {
            "env.name": self.level,
            "reward.misalign_eps": self.eps,
            "swap.sync_every": self.sync_every,
            "train.max_env_steps": self.budget,
            "train.eval_n": self.eval_n,
            "train.eval_every": self.eval_every,
            "train.final_eval_split": "eval",
            "train.final_eval_n": self.final_n,
            "train.threads": self.threads,
            "train.progress_bar": False,  # one printed line per iteration instead (ProgressLine)
            "train.run_dir": str(Path(self.run_dir) / variant),
        }
        for key, value in overrides.items():
            cfg.override(key, value)
        return cfg.validate()


def reward_model(cfg: RunConfig) -> RewardModel:
    """The rewards a run of ``cfg`` is scored with, as the trainer builds them (``run_rewards``: for the
    swap's process labels and outcomes in ``rspo_widgets``' swap figure)."""
    return run_rewards(cfg)


# ------------------------------------------------------------------------------------- callbacks
@dataclass
class ProgressLine:
    """A trainer callback that prints one line per iteration: env steps, the actor's sampled success
    and, for RSPO, the groups the swap rescued (headless runs show no progress bars)."""

    label: str
    print_fn: Callable[[str], None] = print

    def on_update_end(self, event: Any) -> None:
        m = event.metrics
        line = f"{self.label:<8} iteration {event.iteration:>3}  env steps {m.get(ENV_STEPS, math.nan):>6.0f}"
        line += f"  rollout success {m.get(ROLLOUT_SUCCESS, math.nan):.2f}"
        if "swap/rescued_groups" in m:
            line += f"  rescued groups {m['swap/rescued_groups']:.0f}"
        self.print_fn(line)


def rescued_tasks(data: Mapping[str, Any], outcome: Callable[[Any], float]) -> list[str]:
    """The tasks of one ``on_swap`` event's data whose group the swap rescued, in the actor's order:
    the actor's own outcomes had no variance (every GRPO advantage 0) and the mixed group's have some.
    """
    before, after = group_outcomes(data["actor"], outcome), group_outcomes(data["mixed"], outcome)
    return [t for t, v in before.items() if _zero_variance(v) and not _zero_variance(after.get(t, []))]


@dataclass
class SwapKeeper:
    """A trainer callback that keeps the first ``on_swap`` event in which a group was rescued (the one
    the notebook draws) and counts the swaps it saw; ``event`` stays None if no group ever was."""

    outcome: Callable[[Any], float]
    event: Any = None
    swaps: int = 0

    def on_swap(self, event: Any) -> None:
        self.swaps += 1
        if self.event is None and rescued_tasks(event.data, self.outcome):
            self.event = event

    @property
    def task(self) -> str | None:
        """The first rescued task of the kept event (None without one)."""
        return rescued_tasks(self.event.data, self.outcome)[0] if self.event is not None else None


# ------------------------------------------------------------------------------------------ runs
@dataclass
class Comparison:
    """The three runs of one quickstart: each variant's ``RunResult`` and seconds, and RSPO's kept swap."""

    settings: Quickstart
    results: dict[str, Any]  # variant -> RunResult
    seconds: dict[str, float]
    swap: SwapKeeper


def run_variants(
    settings: Quickstart,
    variants: Sequence[str] = VARIANTS,
    train_fn: Callable[..., Any] | None = None,
    print_fn: Callable[[str], None] = print,
) -> Comparison:
    """Train ``variants`` one after another from the same start (the config's committed warm start),
    each with a progress line per iteration; RSPO's run also keeps a rescued swap (``SwapKeeper``).

    ``train_fn`` is ``rspo_kit.train.train`` unless given (tests pass a stand-in).
    """
    if train_fn is None:
        from rspo_kit.train import train as train_fn
    torch.set_num_threads(settings.threads)
    keeper = SwapKeeper(reward_model(settings.config("rspo")).outcome_return)
    results, seconds = {}, {}
    for variant in variants:
        start = time.perf_counter()
        callbacks = [ProgressLine(variant, print_fn)] + ([keeper] if variant == "rspo" else [])
        results[variant] = train_fn(settings.config(variant), callbacks=callbacks)
        seconds[variant] = time.perf_counter() - start
        print_fn(f"{variant:<8} done in {seconds[variant]:.0f} s: {results[variant].run_dir}")
    return Comparison(settings, results, seconds, keeper)


# ---------------------------------------------------------------------------------------- tables
def success_curves(metrics: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The actor's sampled rollout success against env steps, one row per (variant, iteration):
    columns ``variant``, ``iteration``, ``env_steps``, ``rollout_success``."""
    frames = []
    for variant, m in metrics.items():
        rows = m.dropna(subset=[ROLLOUT_SUCCESS]) if ROLLOUT_SUCCESS in m else m.iloc[:0]
        frames.append(
            pd.DataFrame(
                {
                    "variant": variant,
                    "iteration": rows["iteration"].astype(int).to_numpy(),
                    "env_steps": rows[ENV_STEPS].astype(float).to_numpy(),
                    "rollout_success": rows[ROLLOUT_SUCCESS].astype(float).to_numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class CurveSummary:
    """One variant's curve in two numbers: the mean sampled success of its first and of its last
    ``window`` iterations (one iteration's 32 episodes are too few to read alone)."""

    variant: str
    iterations: int
    env_steps: float
    first: float
    last: float
    window: int


def curve_summaries(curves: pd.DataFrame, window: int = 3) -> list[CurveSummary]:
    """``CurveSummary`` of each variant of ``success_curves``' frame, in its order."""
    out = []
    for variant, c in curves.groupby("variant", sort=False):
        s = c["rollout_success"]
        w = max(1, min(window, len(s)))
        last_steps = float(c["env_steps"].iloc[-1]) if len(c) else math.nan
        out.append(CurveSummary(variant, len(c), last_steps, s.head(w).mean(), s.tail(w).mean(), w))
    return out


def _count(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless one: ``_count(1, "group")`` is "1 group"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def curve_text(curves: pd.DataFrame, window: int = 3) -> str:
    """What the success figure shows, in its own numbers: one line per variant."""
    lines = []
    for c in curve_summaries(curves, window):
        lines.append(
            f"- {LABELS.get(c.variant, c.variant)}: {_count(c.iterations, 'iteration')} to "
            f"{c.env_steps:,.0f} env steps; sampled success {100 * c.first:.0f}% in its first "
            f"{_count(c.window, 'iteration')}, {100 * c.last:.0f}% in its last {c.window}."
        )
    return "\n".join(lines)


def rescue_table(metrics: pd.DataFrame, tasks_per_iteration: int) -> pd.DataFrame:
    """RSPO's swap per iteration: env steps, the actor's groups where every episode failed (what a
    replayed success can rescue) and the groups the swap rescued, as counts of groups."""
    columns = ["iteration", "env_steps", "all_failure_groups", "rescued_groups"]
    if "swap/rescued_groups" not in metrics:  # a run without a swap
        return pd.DataFrame(columns=columns)
    rows = metrics.dropna(subset=["swap/rescued_groups"])
    failed = (rows["swap/all_failure_groups_before"] * tasks_per_iteration).round()
    values = [rows["iteration"], rows[ENV_STEPS], failed, rows["swap/rescued_groups"]]
    types = [int, float, int, int]
    return pd.DataFrame({c: v.astype(t).to_numpy() for c, v, t in zip(columns, values, types, strict=True)})


def rescue_text(rescues: pd.DataFrame, tasks_per_iteration: int) -> str:
    """What the rescue figure shows, in its own numbers (one paragraph)."""
    if rescues.empty:
        return "RSPO ran no swap (no iteration finished)."
    groups = len(rescues) * tasks_per_iteration
    failed, rescued = int(rescues["all_failure_groups"].sum()), int(rescues["rescued_groups"].sum())
    with_rescue = int((rescues["rescued_groups"] > 0).sum())
    return (
        f"Over RSPO's {_count(len(rescues), 'iteration')} ({groups} actor groups, one per task), "
        f"{_count(failed, 'group')} failed every episode, so GRPO's advantages were 0 there; the swap "
        f"rescued {_count(rescued, 'group')}, in {with_rescue} of the {_count(len(rescues), 'iteration')}."
    )


@dataclass(frozen=True)
class RescuedGroup:
    """One rescued group as numbers: the actor's outcomes, the explorer's on the same task, and the
    mixed group the actor was updated on with each member's GRPO advantage."""

    iteration: int
    task: str
    actor_outcomes: list[float]
    explorer_outcomes: list[float]
    admitted: int  # of the explorer's episodes, those that entered the replay buffer
    mixed_outcomes: list[float]
    mixed_replayed: list[bool]
    mixed_advantages: list[float]

    def text(self) -> str:
        """The group in plain text: the fallback beside its figure."""

        def row(values: Sequence[float]) -> str:
            return " ".join(f"{v:g}" for v in values)

        adv = " ".join(
            f"{'R' if r else 'A'}{a:+.2f}"
            for a, r in zip(self.mixed_advantages, self.mixed_replayed, strict=True)
        )
        return "\n".join(
            [
                f"iteration {self.iteration}, task {self.task}",
                f"  actor's group, outcomes:  {row(self.actor_outcomes)}  (no variance: every advantage 0)",
                f"  explorer's episodes:      {row(self.explorer_outcomes)}  ({self.admitted} to the buffer)",
                f"  mixed group, outcomes:    {row(self.mixed_outcomes)}",
                f"  mixed group, advantages:  {adv}  (A: the actor's own, R: replayed)",
            ]
        )


def rescued_group(
    event: Any, task: str, outcome: Callable[[Any], float], divide_by_std: bool
) -> RescuedGroup:
    """``task``'s group in an ``on_swap`` event; advantages as GRPO computes them on the mixed group
    (``divide_by_std``: the run's ``cfg.algo.divide_by_std``)."""
    data = event.data
    offpolicy = list(data.get("offpolicy") or [t.source == "replay" for t in data["mixed"]])
    mixed = [(t, off) for t, off in zip(data["mixed"], offpolicy, strict=True) if t.task_id == task]
    buffered = {id(t) for t in data.get("buffer", [])}
    explorer = [t for t in data["explorer"] if t.task_id == task]
    outcomes = torch.tensor([outcome(t) for t, _ in mixed], dtype=torch.float64)
    advantages = grpo_advantages(outcomes, torch.zeros(len(mixed), dtype=torch.long), use_std=divide_by_std)
    return RescuedGroup(
        iteration=int(event.iteration),
        task=task,
        actor_outcomes=[outcome(t) for t in data["actor"] if t.task_id == task],
        explorer_outcomes=[outcome(t) for t in explorer],
        admitted=sum(id(t) in buffered for t in explorer),
        mixed_outcomes=outcomes.tolist(),
        mixed_replayed=[bool(off) for _, off in mixed],
        mixed_advantages=advantages.tolist(),
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


def paired_difference(a: pd.DataFrame, b: pd.DataFrame, evaluation: str = FINAL) -> PairedDifference:
    """``a`` − ``b`` on ``evaluation``, task by task, from two runs' ``load_episodes`` frames.

    Episodes pair on task and sample, as ``rspo_kit.experiments.report.task_paired_table`` pairs them
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
    """One variant's success on ``FINAL`` with its 95% Wilson interval, as the trainer reported it."""

    success: float
    ci_low: float
    ci_high: float
    tasks: int


def final_success(metrics: pd.DataFrame, evaluation: str = FINAL) -> FinalSuccess:
    """The last row's ``<evaluation>/success`` and interval (NaN where the run did not evaluate it)."""
    last = metrics.iloc[-1] if len(metrics) else pd.Series(dtype=float)

    def get(key: str) -> float:
        value = last.get(f"{evaluation}/{key}", math.nan)
        return math.nan if value is None else float(value)

    tasks = get("tasks")
    return FinalSuccess(get("success"), get("ci_low"), get("ci_high"), 0 if math.isnan(tasks) else int(tasks))


@dataclass
class Summary:
    """The measured final differences: each variant's ``FinalSuccess`` and RSPO − each other variant."""

    finals: dict[str, FinalSuccess]
    differences: dict[str, PairedDifference] = field(default_factory=dict)  # other variant -> RSPO − it

    def table(self) -> pd.DataFrame:
        """One short table in percent: a row per variant (Wilson interval over its episodes), then a
        row per difference (t-interval over the paired tasks)."""
        rows = []
        for variant, f in self.finals.items():
            interval = f"[{value_text(f.ci_low, 'percent')}, {value_text(f.ci_high, 'percent')}]"
            rows.append(
                [LABELS.get(variant, variant), value_text(f.success, "percent"), interval, f"{f.tasks}"]
            )
        for other, d in self.differences.items():
            interval = f"[{value_text(d.ci_low, 'percent', True)}, {value_text(d.ci_high, 'percent', True)}]"
            label = f"RSPO − {other}"
            pairs = f"{d.tasks} paired; won only by RSPO / {other}: {d.only_a} / {d.only_b}"
            rows.append([label, value_text(d.mean, "percent", True), interval, pairs])
        return pd.DataFrame(rows, columns=["", "sampled eval success (%)", "95% interval", "tasks"])

    def text(self) -> str:
        """The table's conclusion in its own numbers: one line per difference."""
        lines = []
        for other, d in self.differences.items():
            if math.isnan(d.ci_low):
                verdict = "too few paired tasks for an interval"
            elif d.ci_low > 0:
                verdict = "the interval lies above zero: RSPO measurably ahead"
            elif d.ci_high < 0:
                verdict = "the interval lies below zero: RSPO measurably behind"
            else:
                verdict = "the interval includes zero: no measurable difference on these tasks"
            lines.append(
                f"- RSPO − {other}: {value_text(d.mean, 'percent', True)} points "
                f"[{value_text(d.ci_low, 'percent', True)}, {value_text(d.ci_high, 'percent', True)}] "
                f"over {d.tasks} tasks; {verdict}."
            )
        return "\n".join(lines)

    def record(self) -> dict[str, Any]:
        """The numbers to ``record``: ``<variant>_success`` and ``<variant>_ci`` ([low, high]) per
        variant, ``rspo_minus_<other>`` and ``rspo_minus_<other>_ci`` per difference."""
        out: dict[str, Any] = {}
        for variant, f in self.finals.items():
            out[f"{variant}_success"], out[f"{variant}_ci"] = f.success, [f.ci_low, f.ci_high]
        for other, d in self.differences.items():
            out[f"rspo_minus_{other}"], out[f"rspo_minus_{other}_ci"] = d.mean, [d.ci_low, d.ci_high]
            out[f"rspo_minus_{other}_tasks"] = d.tasks
        return out


def summarize(run_dirs: Mapping[str, str | Path], metrics: Mapping[str, pd.DataFrame]) -> Summary:
    """``Summary`` of the runs: each variant's final sampled success from its metrics, and RSPO minus
    every other variant task by task from the runs' final episodes (``final_episodes.parquet``)."""
    finals = {v: final_success(m) for v, m in metrics.items()}
    differences = {}
    if "rspo" in run_dirs:
        rspo = load_episodes(run_dirs["rspo"])
        for other in (v for v in run_dirs if v != "rspo"):
            differences[other] = paired_difference(rspo, load_episodes(run_dirs[other]))
    return Summary(finals, differences)


# ---------------------------------------------------------------------------------- headless run
NOTEBOOK = "notebooks/00_quickstart.ipynb"


def _kernel_manager_config() -> dict[str, dict[str, str]]:
    """Kernels on IPC sockets where the OS has them: ipykernel >= 7 warns at every start of a kernel
    whose channels are plain TCP, and local sockets are what it asks for (TCP stays on Windows)."""
    return {"KernelManager": {"transport": "ipc"}} if os.name == "posix" else {}


def run_headless(output: str | Path, parameters: Mapping[str, Any], stream: Any = None) -> Path:
    """Execute the quickstart notebook with papermill into ``output``, ``INTERACTIVE`` False, on the
    rspo-kit kernel; the cells' printed lines go to ``stream`` as they come (None: nowhere)."""
    import papermill as pm
    from traitlets.config import Config

    from rspo_kit.experiments.sweep import HEADLESS_ENV, ensure_kernel

    os.environ.update(HEADLESS_ENV)  # inherited by the kernel: no library progress bars
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(
        str(repository_path(NOTEBOOK)),
        str(output),
        parameters={"INTERACTIVE": False, **parameters},
        kernel_name=ensure_kernel(),
        progress_bar=False,
        stdout_file=stream,
        config=Config(_kernel_manager_config()),
    )
    return Path(output)


def _value(text: str) -> Any:
    """A ``-p`` value as papermill's command line reads one: a Python literal, else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the quickstart headless into OUTPUT and print its recorded results."""
    parser = argparse.ArgumentParser(
        prog="python -m rspo_kit.experiments.quickstart",
        description="Run notebooks/00_quickstart.ipynb headless and print what it recorded.",
    )
    parser.add_argument("output", help="the executed notebook to write, e.g. runs/demo/00_quickstart.ipynb")
    parser.add_argument(
        "-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="a notebook parameter"
    )
    args = parser.parse_args(argv)
    from rspo_kit.experiments import results

    run_headless(args.output, {name: _value(value) for name, value in args.p}, stream=sys.stdout)
    print(f"executed notebook: {args.output}")
    return results.main([args.output])


if __name__ == "__main__":
    raise SystemExit(main())
