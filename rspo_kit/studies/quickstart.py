"""The quickstart's comparison (notebooks/00_quickstart.ipynb), its protocol and its runs: plain GRPO,
RSPO-GRPO as the paper's Algorithm 1 runs it, and GRPO on the dense reward alone, trained from one
committed warm start for the same number of updates of the actor A, then plain GRPO run on to RSPO's
env steps.

The notebook stays thin: it calls these functions and draws their tables. ``Quickstart`` holds the
notebook's parameters and builds each run's ``RunConfig`` from the chain testbed's protocol
(``preset("chain-4k")``). ``run_variants`` trains the three side by side, prints one line per loop
(``loop_line``: B's dense reward before → after its k steps, the collection's success, what
reward-based sampling drew, A's success) and keeps one replayed trajectory of RSPO's run
(``ReplayKeeper``); with ``equal_env_steps`` it then continues plain GRPO's run until it has spent
RSPO's env steps (``PLAIN_EQUAL_STEPS``). What the notebook shows of the runs, their curves, RSPO's
loops and the final numbers at both budgets, is in ``rspo_kit.studies.quickstart_tables``.

Two budgets, because neither alone is the whole truth (docs/training.md): at **equal updates of A**
(the paper's accounting) every run takes ``loops × k`` updates of A; RSPO's explorer B rolls out about
2.3 times the episodes on top. At **equal env steps** (what a user pays) plain GRPO's run goes on from
its last update until its env steps reach RSPO's (it stops at the first update at or past them).

``python -m rspo_kit.studies.quickstart OUTPUT [-p NAME VALUE]...`` (``make demo``) runs the notebook
headless with papermill, its printed lines streamed to the terminal, then prints both budgets' tables
(``results_table``) and what it recorded.
"""

from __future__ import annotations

import argparse
import ast
import math
import multiprocessing
import os
import queue
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from rspo_kit.experiments.cells import HEADLESS_ENV, ensure_kernel
from rspo_kit.experiments.tables import value_text
from rspo_kit.paths import repository_path
from rspo_kit.records.episodes import EPISODES_FILE
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.views import clip_windows
from rspo_kit.train.config import RunConfig, preset
from rspo_kit.train.trainer import run_rewards, stored_config

# the runs the quickstart compares at equal updates of A, in the order it shows them, and the variant
# of ``preset(swap=...)`` each one is
VARIANTS = ("plain", "rspo", "dense_only")
PRESET_VARIANT = {"plain": "plain", "rspo": "rspo", "dense_only": "process"}
# plain GRPO's run continued until it has spent RSPO's env steps: the comparison at equal env steps
PLAIN_EQUAL_STEPS = "plain_equal_env_steps"
LABELS = {
    "plain": "plain GRPO",
    "rspo": "RSPO-GRPO",
    "dense_only": "GRPO on the dense reward alone",
    PLAIN_EQUAL_STEPS: "plain GRPO, run on to RSPO's env steps",
}
EQUAL_UPDATES, EQUAL_STEPS = "at equal updates of A", "at equal env steps"
ENV_STEPS, ACTOR_UPDATES, ROLLOUT_SUCCESS = "budget/env_steps", "budget/actor_updates", "rollout/success"
# the comparisons of the summary: (budget, a, b) for a − b, where both runs exist
CONTRASTS = (
    (EQUAL_UPDATES, "rspo", "plain"),
    (EQUAL_UPDATES, "rspo", "dense_only"),
    (EQUAL_STEPS, "rspo", PLAIN_EQUAL_STEPS),
)
BUDGET_RUNS = {EQUAL_UPDATES: VARIANTS, EQUAL_STEPS: ("rspo", PLAIN_EQUAL_STEPS)}


def difference_name(a: str, b: str) -> str:
    """The name a − b is recorded under: ``<a>_minus_<b>``."""
    return f"{a}_minus_{b}"


def final_key(split: str) -> str:
    """The evaluation the summary compares: sampled actions on ``split`` (RL optimises the sampled
    policy; the greedy policy of the chain testbed's start already copies the clue almost always)."""
    return f"final_sampled/{split}"


@dataclass(frozen=True)
class Quickstart:
    """The quickstart's parameters; ``config(run)`` is that run's ``RunConfig``.

    Every run starts from the chain-4k protocol's committed warm start (GRPO, lr 1e-3) and takes
    ``loops × swap.loop_steps`` updates of A (``train.updates``): RSPO in ``loops`` loops of the paper's
    Algorithm 1 at its defaults (k = 3, α = 1/8, reward-based sampling, the shifted clip, a collection
    of round(2·(1 − α)·B) tasks), plain and dense-only one update per iteration on B tasks × N.
    ``tasks`` = B is 4 by default, half the protocol's 8, so that ``make demo`` stays within five
    minutes on two cores; round((1 − α)·4) = 4, so RSPO's A then updates on 4 tasks × N plus
    round(α·B·N) replayed trajectories, a little more than plain's 4 × N (at B = 8 the two match:
    7 × N + N). The curve is A's own sampled success in its training rollouts (no separate evaluation
    during training); at the end each run plays ``final_n`` tasks of ``final_split`` with sampled
    actions, one episode each: the success the summary compares.
    """

    level: str = "chain-4x2-cap10"  # the cell chosen on valid (notebook 00 says how)
    eps: float = 0.0  # reward.misalign_eps: the share of the dense reward that a useless lever pays
    # reward.process, the dense reward of RSPO's B and of the dense-only run alike: the chain's
    # hand-written progress along the chain ("auto" would give B a learned progress model, which
    # reads a frozen LM at every step, and the dense-only run another reward)
    dense: str = "subgoal"
    loops: int = 2
    tasks: int | None = 4  # env.tasks_per_iteration, B (None: the protocol's 8)
    group_size: int | None = None  # algo.group_size, N (None: the protocol's 8)
    seed: int = 0
    threads: int = 2
    side_by_side: bool = True  # the runs train at once, each in its own process (see run_variants)
    equal_env_steps: bool = True  # then plain runs on to RSPO's env steps (PLAIN_EQUAL_STEPS)
    final_split: str = "eval"
    final_n: int = 120
    run_dir: str = "runs/quickstart"

    @property
    def threads_per_run(self) -> int:
        """Torch threads of each run: side by side the runs share ``threads`` (at least 1 each)."""
        return max(1, self.threads // len(VARIANTS)) if self.side_by_side else self.threads

    @property
    def final(self) -> str:
        """The evaluation the summary compares (``final_key`` of ``final_split``)."""
        return final_key(self.final_split)

    def config(self, run: str) -> RunConfig:
        """The ``RunConfig`` of ``run`` (one of ``VARIANTS``), its run in ``run_dir/<run>``."""
        if run not in VARIANTS:
            raise ValueError(f"run = {run!r} is not allowed; choose one of {list(VARIANTS)}")
        cfg = preset("chain-4k", algo="grpo", swap=PRESET_VARIANT[run], seed=self.seed)
        updates = self.loops * cfg.swap.loop_steps
        overrides = {
            "env.name": self.level,
            "env.tasks_per_iteration": self.tasks or cfg.env.tasks_per_iteration,
            "algo.group_size": self.group_size or cfg.algo.group_size,
            "reward.process": self.dense,
            "reward.misalign_eps": self.eps,
            "train.updates": updates,
            "train.max_env_steps": None,  # the protocol's env-step budget: the updates end these runs
            "train.iterations": 1000 * updates,  # never the limit
            "train.eval_n": 0,  # no greedy curve: the curve shown is the rollouts' sampled success
            "train.final_eval_split": self.final_split,
            "train.final_eval_n": self.final_n,
            "train.final_eval_greedy": False,  # the summary compares sampled success only
            "train.threads": self.threads_per_run,
            "train.progress_bar": False,  # one printed line per loop instead (LoopLine)
            "train.run_dir": str(Path(self.run_dir) / run),
        }
        for key, value in overrides.items():
            cfg.override(key, value)
        return cfg.validate()


def reward_model(cfg: RunConfig) -> RewardModel:
    """The rewards a run of ``cfg`` is scored with, as the trainer builds them (``run_rewards``)."""
    return run_rewards(cfg)


# ------------------------------------------------------------------------------------- callbacks
def number(m: Mapping[str, Any], key: str) -> float:
    """``m[key]`` as a float, NaN where it is missing or None."""
    value = m.get(key)
    return math.nan if value is None else float(value)


def loop_line(label: str, iteration: int, m: Mapping[str, Any]) -> str:
    """One printed line per iteration: A's updates and env steps so far; for a loop of the paper's
    RSPO, B's mean dense return before its k steps (its first rollout, B = A) → after them (its
    collection), the collection's success, what reward-based sampling drew over A's k updates (how
    many trajectories, their share of successes), and A's success in its on-policy rollouts."""
    head = f"{label:<10} {'loop' if 'explorer/dense_before' in m else 'update'} {iteration:>3}"
    head += f"  A updates {number(m, ACTOR_UPDATES):>3.0f}  env steps {number(m, ENV_STEPS):>6,.0f}"
    if "explorer/dense_before" in m:
        head += (
            f"  B dense {number(m, 'explorer/dense_before'):.2f} → {number(m, 'explorer/dense_after'):.2f}"
            f"  collection success {number(m, 'swap/collect_success'):.2f}"
            f"  drew {number(m, 'swap/replayed'):.0f}"
            f" ({100 * number(m, 'swap/drawn_success_share'):.0f}% won)"
        )
    return head + f"  A success {number(m, ROLLOUT_SUCCESS):.2f}"


@dataclass
class LoopLine:
    """A trainer callback that prints ``loop_line`` after every iteration (headless runs show no
    progress bars)."""

    label: str
    print_fn: Callable[[str], None] = print

    def on_update_end(self, event: Any) -> None:
        self.print_fn(loop_line(self.label, event.iteration, event.metrics))


@dataclass(frozen=True)
class ReplayedTrajectory:
    """One trajectory that A replayed from B's collection, step by step (``steps``: action, dense
    reward, the outcome reward A saw, the stored advantage A_off, π_B of the action, π_old = c·π_B and
    the shifted clip window [c − ε_low, c + ε_high] on the ratio π_θ/π_B, where PPO's would be
    [1 − ε_low, 1 + ε_high])."""

    loop: int
    actor_step: int  # which of A's k updates of the loop replayed it (1-based)
    task: str
    won: bool
    outcome: float
    dense_return: float
    steps: pd.DataFrame

    def text(self) -> str:
        """The trajectory in words, the line above its table."""
        return (
            f"loop {self.loop}, A's update {self.actor_step}: a trajectory of B on {self.task}, "
            f"{'won' if self.won else 'lost'} (outcome {self.outcome:g}), dense return "
            f"{self.dense_return:.2f}, {len(self.steps)} steps"
        )


def replayed_trajectory(
    batches: Sequence[Any], rewards: RewardModel, loop: int, clip_low: float, clip_high: float
) -> ReplayedTrajectory | None:
    """The replayed trajectory to show from one loop's updated batches of A (``on_update_end``'s
    ``batches``): the first won one with a non-zero stored advantage (a success of a group where B
    mostly failed: the signal a replay carries), else the first replayed one; None without any."""
    found = []
    for j, batch in enumerate(batches, 1):
        for n, (traj, off) in enumerate(zip(batch.trajs, batch.offpolicy, strict=True)):
            if off:
                stored = batch.stored_advantages[n]
                found.append((not (traj.won and stored and any(stored)), j, n))
    if not found:
        return None
    _, j, n = min(found)
    batch = batches[j - 1]
    traj = batch.trajs[n]
    windows = clip_windows(batch, clip_low, clip_high)
    windows = windows[windows["trajectory"] == n].reset_index(drop=True)
    stored = batch.stored_advantages[n] or [math.nan] * len(traj.steps)
    steps = pd.DataFrame(
        {
            "step": range(len(traj.steps)),
            "action": [s.action for s in traj.steps],
            "dense_reward": rewards.process_steps(traj),
            "outcome_reward": batch.rewards[n],
            "stored_advantage": stored,
        }
    )
    steps = steps.join(windows[["pi_B", "pi_old", "center", "low", "high"]])
    return ReplayedTrajectory(
        loop=loop,
        actor_step=j,
        task=str(traj.task_id),
        won=bool(traj.won),
        outcome=rewards.outcome_return(traj),
        dense_return=float(sum(steps["dense_reward"])),
        steps=steps,
    )


@dataclass
class ReplayKeeper:
    """A trainer callback that keeps ``replayed_trajectory`` of the first loop whose draws hold a won
    trajectory (else of the last loop with any draw): small tables, so that a run in another process
    can hand it back."""

    rewards: RewardModel
    clip_low: float
    clip_high: float
    kept: ReplayedTrajectory | None = None

    def on_update_end(self, event: Any) -> None:
        if self.kept is not None and self.kept.won:
            return
        found = replayed_trajectory(
            event.data.get("batches", ()), self.rewards, event.iteration, self.clip_low, self.clip_high
        )
        if found is not None:
            self.kept = found


# ------------------------------------------------------------------------------------------ runs
@dataclass
class Comparison:
    """The runs of one quickstart: each run's ``RunResult`` and seconds (``PLAIN_EQUAL_STEPS`` among
    them where plain ran on), and the replayed trajectory RSPO's run kept."""

    settings: Quickstart
    results: dict[str, Any]  # run -> RunResult
    seconds: dict[str, float]
    replayed: ReplayedTrajectory | None = None

    @property
    def metrics(self) -> dict[str, pd.DataFrame]:
        return {run: result.metrics for run, result in self.results.items()}

    @property
    def run_dirs(self) -> dict[str, Path]:
        return {run: Path(result.run_dir) for run, result in self.results.items()}


def run_variants(
    settings: Quickstart,
    variants: Sequence[str] = VARIANTS,
    train_fn: Callable[..., Any] | None = None,
    print_fn: Callable[[str], None] = print,
) -> Comparison:
    """Train ``variants`` from the same start (the config's committed warm start), each printing a line
    per loop; RSPO's run also keeps a replayed trajectory (``ReplayKeeper``). Then, with
    ``settings.equal_env_steps``, plain's run goes on to RSPO's env steps (``continue_plain``).

    With ``settings.side_by_side`` each variant trains in a process of its own, all at once, on
    ``settings.threads_per_run`` torch threads (their share of ``threads``, at least 1), and their lines
    come as they are printed; else one after another on ``threads`` threads. Side by side is faster
    where the model is small (one thread per run keeps a core busier than two threads sharing one
    run's small matrices). A variant whose run fails stops the others and raises ``RuntimeError`` with
    its traceback. ``train_fn`` is ``rspo_kit.train.train`` unless given (tests pass a module-level
    stand-in); it is called as ``train_fn(cfg, callbacks=...)`` and, to continue plain, with
    ``resume=run_dir`` too.
    """
    if train_fn is None:
        from rspo_kit.train import train as train_fn
    if settings.side_by_side and len(variants) > 1:
        outcomes = _side_by_side(settings, variants, train_fn, print_fn)
    else:
        torch.set_num_threads(settings.threads_per_run)
        outcomes = {}
        for variant in variants:
            outcomes[variant] = _train_variant(settings, variant, train_fn, print_fn)
            print_fn(_done_line(variant, outcomes[variant]))
    comparison = Comparison(
        settings,
        {v: outcomes[v].result for v in variants},
        {v: outcomes[v].seconds for v in variants},
        outcomes["rspo"].replayed if "rspo" in outcomes else None,
    )
    if settings.equal_env_steps and {"plain", "rspo"} <= set(variants):
        continue_plain(comparison, train_fn, print_fn)
    return comparison


def spent(metrics: pd.DataFrame) -> tuple[int, int]:
    """A run's updates of A and env steps (actor and explorer together) at its last row that counts
    them (0 where none does)."""

    def last(key: str) -> int:
        values = metrics[key].dropna() if key in metrics else ()
        return int(values.iloc[-1]) if len(values) else 0

    return last(ACTOR_UPDATES), last(ENV_STEPS)


def continue_plain(
    comparison: Comparison, train_fn: Callable[..., Any], print_fn: Callable[[str], None] = print
) -> None:
    """Plain's finished run, copied to ``run_dir/PLAIN_EQUAL_STEPS`` (its final episodes left out) and
    resumed with RSPO's env steps as its budget: its first updates are plain's, and it stops at the
    first update at or past RSPO's env steps; then its own final evaluation. Added to ``comparison``."""
    settings = comparison.settings
    _, rspo_steps = spent(comparison.results["rspo"].metrics)
    source, target = Path(comparison.results["plain"].run_dir), Path(settings.run_dir) / PLAIN_EQUAL_STEPS
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(EPISODES_FILE))
    # plain's own stored config (its reward settings as the trainer resolved them), with a new budget
    cfg = stored_config(target)
    for key, value in {
        "train.updates": None,
        "train.max_env_steps": rspo_steps,
        "train.threads": settings.threads,  # alone now: every thread
        "train.run_dir": str(target),
    }.items():
        cfg.override(key, value)
    torch.set_num_threads(settings.threads)
    print_fn(f"{'plain':<10} runs on to RSPO's {rspo_steps:,} env steps")
    start = time.perf_counter()
    result = train_fn(cfg.validate(), callbacks=[LoopLine("plain", print_fn)], resume=target)
    comparison.results[PLAIN_EQUAL_STEPS] = result
    comparison.seconds[PLAIN_EQUAL_STEPS] = time.perf_counter() - start
    print_fn(f"{'plain':<10} done in {comparison.seconds[PLAIN_EQUAL_STEPS]:.0f} s: {result.run_dir}")


@dataclass
class _Trained:
    """One variant's run as its process hands it back: the ``RunResult``, its seconds and, for RSPO,
    the replayed trajectory ``ReplayKeeper`` kept."""

    result: Any
    seconds: float
    replayed: ReplayedTrajectory | None = None


def _train_variant(
    settings: Quickstart, variant: str, train_fn: Callable[..., Any], print_fn: Callable[[str], None]
) -> _Trained:
    cfg = settings.config(variant)
    callbacks: list[Any] = [LoopLine(variant, print_fn)]
    keeper = None
    if variant == "rspo":
        keeper = ReplayKeeper(reward_model(cfg), cfg.algo.clip_low, cfg.algo.clip_high)
        callbacks.append(keeper)
    start = time.perf_counter()
    result = train_fn(cfg, callbacks=callbacks)
    seconds = time.perf_counter() - start
    return _Trained(result, seconds, keeper.kept if keeper else None)


def _done_line(variant: str, trained: _Trained) -> str:
    return f"{variant:<10} done in {trained.seconds:.0f} s: {trained.result.run_dir}"


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
    ctx.set_forkserver_preload(["rspo_kit.train", "rspo_kit.studies.quickstart"])
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


# --------------------------------------------------------------------------------- demo's results
def results_table(results: Mapping[str, Any]) -> str:
    """Both budgets' comparisons from what the notebook recorded (``Summary.record``'s keys), as the
    text ``make demo`` prints at its end: per budget each run's updates of A, env steps and sampled
    success, then each difference with its interval."""
    lines = []
    for budget, runs in BUDGET_RUNS.items():
        present = [r for r in runs if f"{r}_success" in results]
        if not present:
            continue
        lines.append(f"{budget}:")
        for run in present:
            low, high = results.get(f"{run}_ci") or (None, None)
            lines.append(
                f"  {LABELS.get(run, run):<40} {results['actor_updates'][run]:>4} updates of A "
                f"{results['env_steps'][run]:>8,} env steps  {value_text(results[f'{run}_success'], 'percent'):>5}% "
                f"[{value_text(low, 'percent')}, {value_text(high, 'percent')}]"
            )
        for b_, a, b in CONTRASTS:
            name = difference_name(a, b)
            if b_ == budget and name in results:
                low, high = results.get(f"{name}_ci") or (None, None)
                lines.append(
                    f"  {LABELS[a] + ' − ' + LABELS[b]:<72} {value_text(results[name], 'percent', True):>6} "
                    f"[{value_text(low, 'percent', True)}, {value_text(high, 'percent', True)}] over "
                    f"{results.get(f'{name}_tasks')} paired tasks"
                )
    return "\n".join(lines)


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
        prog="python -m rspo_kit.studies.quickstart",
        description="Run notebooks/00_quickstart.ipynb headless and print what it recorded.",
    )
    parser.add_argument("output", help="the executed notebook to write, e.g. runs/demo/00_quickstart.ipynb")
    parser.add_argument(
        "-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="a notebook parameter"
    )
    args = parser.parse_args(argv)
    from rspo_kit.experiments import results
    from rspo_kit.records import read_results

    run_headless(args.output, {name: _value(value) for name, value in args.p}, stream=sys.stdout)
    print(f"executed notebook: {args.output}")
    print(results_table(read_results(args.output)))
    return results.main([args.output])


if __name__ == "__main__":
    raise SystemExit(main())
