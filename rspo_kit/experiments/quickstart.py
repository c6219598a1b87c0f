"""The quickstart's comparison: plain GRPO, RSPO-GRPO and GRPO on the process reward alone, trained from
one committed start at one budget of env steps, and what the swap did (notebooks/00_quickstart.ipynb).

The notebook stays thin: it calls these functions and draws their tables. ``Quickstart`` holds the
notebook's parameters and builds each variant's ``RunConfig`` from the chain testbed's protocol
(``preset("chain-4k")``); ``run_variants`` trains the three side by side with a progress line per
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
import multiprocessing
import os
import queue
import sys
import time
import traceback
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
    G=8) and stops at ``budget`` env steps, actor and explorer together; its curve is the actor's own
    sampled success per iteration (no separate evaluation during training), and at the end it plays
    ``final_n`` eval tasks with sampled actions, one episode each: the success the summary compares.
    """

    level: str = "chain-4x2-cap8"
    eps: float = 0.5  # reward.misalign_eps: the share of the process reward that a lever pays
    sync_every: int = 1  # swap.sync_every: B <- A every k iterations (0: at the first only)
    budget: int = 3000
    seed: int = 0
    threads: int = 2
    side_by_side: bool = True  # the variants train at once, each in its own process (see run_variants)
    final_n: int = 120
    run_dir: str = "runs/quickstart"

    @property
    def threads_per_run(self) -> int:
        """Torch threads of each run: side by side the variants share ``threads`` (at least 1 each)."""
        return max(1, self.threads // len(VARIANTS)) if self.side_by_side else self.threads

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
            "train.eval_n": 0,  # no greedy curve: the curve shown is the rollouts' sampled success
            "train.final_eval_split": "eval",
            "train.final_eval_n": self.final_n,
            "train.final_eval_greedy": False,  # the summary compares sampled success only
            "train.threads": self.threads_per_run,
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
    """Train ``variants`` from the same start (the config's committed warm start), each with a progress
    line per iteration; RSPO's run also keeps a rescued swap (``SwapKeeper``).

    With ``settings.side_by_side`` each variant trains in a process of its own, all at once, on
    ``settings.threads_per_run`` torch threads (their share of ``threads``, at least 1), and their lines
    come as they are printed; else one after another on ``threads`` threads. Side by side is faster
    where the model is small: on 2 cores the demo's three runs took 104-107 s side by side against
    138 s one after another on 2 threads (one thread per run keeps a core busier than two threads
    sharing one run's small matrices).
    A variant whose run fails stops the others and raises ``RuntimeError`` with its traceback.
    ``train_fn`` is ``rspo_kit.train.train`` unless given (tests pass a module-level stand-in).
    """
    if train_fn is None:
        from rspo_kit.train import train as train_fn
    keeper = _swap_keeper(settings)
    if settings.side_by_side and len(variants) > 1:
        outcomes = _side_by_side(settings, variants, train_fn, print_fn)
    else:
        torch.set_num_threads(settings.threads_per_run)
        outcomes = {}
        for variant in variants:
            outcomes[variant] = _train_variant(settings, variant, train_fn, print_fn)
            print_fn(_done_line(variant, outcomes[variant]))
    results = {v: outcomes[v].result for v in variants}
    seconds = {v: outcomes[v].seconds for v in variants}
    if "rspo" in outcomes:
        keeper.event, keeper.swaps = outcomes["rspo"].swap_event, outcomes["rspo"].swaps
    return Comparison(settings, results, seconds, keeper)


@dataclass
class _Trained:
    """One variant's run as its process hands it back: the ``RunResult``, its seconds and, for RSPO, the
    ``on_swap`` event ``SwapKeeper`` kept and the number of swaps it saw."""

    result: Any
    seconds: float
    swap_event: Any = None
    swaps: int = 0


def _swap_keeper(settings: Quickstart) -> SwapKeeper:
    """RSPO's ``SwapKeeper``, judging outcomes by the rewards its run is scored with."""
    return SwapKeeper(reward_model(settings.config("rspo")).outcome_return)


def _train_variant(
    settings: Quickstart, variant: str, train_fn: Callable[..., Any], print_fn: Callable[[str], None]
) -> _Trained:
    keeper = _swap_keeper(settings) if variant == "rspo" else None
    start = time.perf_counter()
    callbacks = [ProgressLine(variant, print_fn)] + ([keeper] if keeper is not None else [])
    result = train_fn(settings.config(variant), callbacks=callbacks)
    seconds = time.perf_counter() - start
    return _Trained(result, seconds, keeper.event if keeper else None, keeper.swaps if keeper else 0)


def _done_line(variant: str, trained: _Trained) -> str:
    return f"{variant:<8} done in {trained.seconds:.0f} s: {trained.result.run_dir}"


def _variant_process(
    settings: Quickstart, variant: str, train_fn: Callable[..., Any], threads: int, messages
) -> None:
    """The body of one variant's process: its lines, then its ``_Trained`` or its traceback, to ``messages``."""
    try:
        torch.set_num_threads(threads)
        trained = _train_variant(
            settings, variant, train_fn, lambda line: messages.put(("line", variant, line))
        )
        messages.put(("done", variant, trained))
    except BaseException:  # the parent raises it, with the traceback, as the variant's failure
        messages.put(("error", variant, traceback.format_exc()))


def _context() -> Any:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rspo_kit.train", "rspo_kit.experiments.quickstart"])
    return ctx


def _side_by_side(
    settings: Quickstart,
    variants: Sequence[str],
    train_fn: Callable[..., Any],
    print_fn: Callable[[str], None],
) -> dict[str, _Trained]:
    """Every variant in a process of its own, its printed lines relayed through one queue.

    The processes fork from a server that has imported the trainer once (``forkserver``: never from
    this process, whose copy after torch's thread pool has run can hang); where there is no fork
    server (Windows) each is spawned and imports it itself.
    """
    ctx = _context()
    messages = ctx.Queue()
    threads = settings.threads_per_run
    procs = {
        v: ctx.Process(
            target=_variant_process, args=(settings, v, train_fn, threads, messages), name=f"quickstart-{v}"
        )
        for v in variants
    }
    outcomes: dict[str, _Trained] = {}
    silent_and_gone: set[str] = set()  # exited with nothing more to read: one more empty poll, then failed
    try:
        for proc in procs.values():
            proc.start()
        while len(outcomes) < len(variants):
            try:
                kind, variant, payload = messages.get(timeout=1.0)
            except queue.Empty:
                gone = {v for v, p in procs.items() if v not in outcomes and not p.is_alive()}
                lost = gone & silent_and_gone
                if lost:
                    v = sorted(lost)[0]
                    raise RuntimeError(
                        f"the quickstart's {v} run ended without a result (exit code {procs[v].exitcode})"
                    ) from None
                silent_and_gone = gone
                continue
            if kind == "line":
                print_fn(payload)
            elif kind == "done":
                outcomes[variant] = payload
                print_fn(_done_line(variant, payload))
            else:
                raise RuntimeError(f"the quickstart's {variant} run failed:\n{payload}")
    finally:
        for proc in procs.values():
            if proc.is_alive() and any(v not in outcomes for v in variants):
                proc.terminate()
        for proc in procs.values():
            proc.join()
    return outcomes


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

    def frame(self) -> pd.DataFrame:
        """The mixed group, one row per member in the update's order: ``member`` (A1, A2, ... the
        actor's own; R1, ... replayed), ``source``, ``outcome`` and GRPO ``advantage``: what its
        figure draws."""
        counts = {True: 0, False: 0}
        rows = []
        for outcome, replayed, advantage in zip(
            self.mixed_outcomes, self.mixed_replayed, self.mixed_advantages, strict=True
        ):
            counts[replayed] += 1
            rows.append(
                {
                    "member": f"{'R' if replayed else 'A'}{counts[replayed]}",
                    "source": "replayed (explorer)" if replayed else "actor's own",
                    "outcome": outcome,
                    "advantage": advantage,
                }
            )
        return pd.DataFrame(rows, columns=["member", "source", "outcome", "advantage"])

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
