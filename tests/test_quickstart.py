"""The quickstart's library (rspo_kit.experiments.quickstart): configs, callbacks, tables, paired differences.

The paired difference is checked against a plain loop over tasks; the swap callbacks on hand-made
trajectories; ``run_variants`` with a stand-in for ``train``. The notebook itself runs in
tests/test_notebooks.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from rspo_kit.experiments.quickstart import (
    FINAL,
    VARIANTS,
    FinalSuccess,
    PairedDifference,
    ProgressLine,
    Quickstart,
    Summary,
    SwapKeeper,
    curve_summaries,
    curve_text,
    final_success,
    paired_difference,
    rescue_table,
    rescue_text,
    rescued_group,
    rescued_tasks,
    run_variants,
    success_curves,
)


# ------------------------------------------------------------------------------------- configs
def test_each_variant_is_the_chain_protocol_with_the_notebooks_parameters():
    q = Quickstart(level="chain-4x2-cap10", eps=0.5, sync_every=0, budget=900, seed=3, run_dir="out")
    modes = {v: (q.config(v).swap.mode, q.config(v).reward.train_on) for v in VARIANTS}
    assert modes == {"plain": ("off", "outcome"), "rspo": ("rspo", "outcome"), "process": ("off", "process")}
    cfg = q.config("rspo")
    assert (cfg.env.name, cfg.reward.misalign_eps, cfg.swap.sync_every) == ("chain-4x2-cap10", 0.5, 0)
    assert (cfg.train.max_env_steps, cfg.train.seed, cfg.algo.name) == (900, 3, "grpo")
    assert (
        cfg.train.final_eval_split == "eval"
        and cfg.train.final_eval_sampled
        and not cfg.train.final_eval_greedy
    )
    assert cfg.train.eval_n == 0  # the curve is the rollouts' own sampled success
    assert cfg.train.run_dir == "out/rspo" and not cfg.train.progress_bar
    assert cfg.policy.warmstart_from and cfg.policy.warmstart_from.startswith("results/warm_starts/chain4x2")
    with pytest.raises(ValueError, match="'control' is not allowed"):
        q.config("control")


# ----------------------------------------------------------------------------------- callbacks
@dataclass
class Traj:
    task_id: str
    won: bool
    source: str = "actor"
    steps: list = field(default_factory=list)


def outcome(t: Traj) -> float:
    return float(t.won)


def swap_event(iteration: int, actor: dict, explorer: dict, replayed: dict, admitted: int = 0):
    """An ``on_swap`` event: per task, the actor's wins, the explorer's, and the replayed ones mixed in."""
    a = [Traj(task, w) for task, wins in actor.items() for w in wins]
    e = [Traj(task, w, "explorer") for task, wins in explorer.items() for w in wins]
    r = [Traj(task, w, "replay") for task, wins in replayed.items() for w in wins]
    mixed = [
        t
        for task in actor
        for t in (*[x for x in a if x.task_id == task], *[x for x in r if x.task_id == task])
    ]
    data = {"actor": a, "explorer": e, "mixed": mixed, "offpolicy": [t.source == "replay" for t in mixed]}
    data["buffer"] = [t for t in e if t.won][:admitted]
    return SimpleNamespace(iteration=iteration, data=data, metrics={})


def test_rescued_tasks_are_the_all_equal_groups_that_mixing_gave_variance():
    event = swap_event(
        1,
        actor={"fail": [0, 0, 0], "mixed": [1, 0, 0], "won": [1, 1, 1], "still": [0, 0, 0], "saved": [0, 0]},
        explorer={},
        replayed={"fail": [1], "mixed": [1], "won": [1], "still": [0], "saved": [1]},
    )
    # "mixed" had variance already, "won" stays all-success, "still" got only a failure
    assert rescued_tasks(event.data, outcome) == ["fail", "saved"]


def test_swap_keeper_keeps_the_first_swap_with_a_rescue():
    keeper = SwapKeeper(outcome)
    none = swap_event(1, actor={"a": [0, 0]}, explorer={"a": [0]}, replayed={})
    first = swap_event(2, actor={"a": [0, 1], "b": [0, 0]}, explorer={"b": [1]}, replayed={"b": [1]})
    later = swap_event(3, actor={"c": [0, 0]}, explorer={"c": [1]}, replayed={"c": [1]})
    assert keeper.task is None
    for event in (none, first, later):
        keeper.on_swap(event)
    assert keeper.event is first and keeper.task == "b" and keeper.swaps == 3


def test_rescued_group_gives_the_mixed_groups_grpo_advantages():
    event = swap_event(
        4, actor={"t": [0, 0, 0, 0]}, explorer={"t": [1, 0, 1], "u": [1]}, replayed={"t": [1]}, admitted=2
    )
    group = rescued_group(event, "t", outcome, divide_by_std=True)
    assert (group.iteration, group.task, group.admitted) == (4, "t", 2)
    assert group.actor_outcomes == [0, 0, 0, 0] and group.explorer_outcomes == [1, 0, 1]
    assert group.mixed_outcomes == [0, 0, 0, 0, 1] and group.mixed_replayed == [False] * 4 + [True]
    std = statistics.stdev([0, 0, 0, 0, 1])  # unbiased, as GRPO's group std
    expected = [(r - 0.2) / (std + 1e-6) for r in group.mixed_outcomes]
    assert group.mixed_advantages == pytest.approx(expected)
    plain = rescued_group(event, "t", outcome, divide_by_std=False).mixed_advantages
    assert plain == pytest.approx([-0.2] * 4 + [0.8])
    text = group.text()
    assert "task t" in text and "0 0 0 0 1" in text and "R+1.79" in text and "2 to the buffer" in text
    frame = group.frame()  # what the notebook's bar chart draws, in the update's order
    assert frame["member"].tolist() == ["A1", "A2", "A3", "A4", "R1"]
    assert frame["source"].tolist() == ["actor's own"] * 4 + ["replayed (explorer)"]
    assert frame["outcome"].tolist() == group.mixed_outcomes
    assert frame["advantage"].tolist() == group.mixed_advantages


def test_progress_line_prints_steps_success_and_rescues():
    lines: list[str] = []
    line = ProgressLine("rspo", lines.append)
    metrics = {"rollout/cumulative_env_steps": 384.0, "rollout/success": 0.125, "swap/rescued_groups": 2.0}
    line.on_update_end(SimpleNamespace(iteration=3, metrics=metrics))
    line.on_update_end(SimpleNamespace(iteration=4, metrics={"rollout/cumulative_env_steps": 500.0}))
    assert lines[0] == "rspo     iteration   3  env steps    384  rollout success 0.12  rescued groups 2"
    assert lines[1].endswith("rollout success nan")


def stand_in_train(cfg, callbacks):
    """``train``'s stand-in (module level: side-by-side runs pickle it into their processes): one progress
    line, RSPO's keeper given a swap, and the call recorded in the result."""
    for cb in callbacks:
        if isinstance(cb, ProgressLine):
            cb.on_update_end(SimpleNamespace(iteration=1, metrics={"rollout/cumulative_env_steps": 256.0}))
        if isinstance(cb, SwapKeeper):
            cb.event, cb.swaps = SimpleNamespace(iteration=7, data={"task": "t"}), 5
    call = (cfg.swap.mode, cfg.reward.train_on, [type(c).__name__ for c in callbacks])
    return SimpleNamespace(
        run_dir=cfg.train.run_dir,
        metrics=pd.DataFrame(),
        call=call,
        threads=(torch.get_num_threads(), cfg.train.threads),
    )


def failing_train(cfg, callbacks):
    if cfg.reward.train_on == "process":
        raise ValueError("no process reward here")
    return stand_in_train(cfg, callbacks)


EXPECTED_CALLS = {
    "plain": ("off", "outcome", ["ProgressLine"]),
    "rspo": ("rspo", "outcome", ["ProgressLine", "SwapKeeper"]),
    "process": ("off", "process", ["ProgressLine"]),
}


@pytest.mark.parametrize("side_by_side", [False, True], ids=["one_after_another", "side_by_side"])
def test_run_variants_trains_each_and_keeps_rspos_swap(tmp_path, side_by_side):
    printed: list[str] = []
    settings = Quickstart(run_dir=str(tmp_path), threads=3, side_by_side=side_by_side)
    runs = run_variants(settings, train_fn=stand_in_train, print_fn=printed.append)
    assert {v: r.call for v, r in runs.results.items()} == EXPECTED_CALLS
    assert list(runs.results) == list(VARIANTS) and set(runs.seconds) == set(VARIANTS)
    assert runs.results["rspo"].run_dir == str(tmp_path / "rspo")
    # side by side: 3 threads shared by 3 processes; one after another: all 3 for each run (torch's
    # now, and the config's, which the trainer sets again)
    threads = 1 if side_by_side else 3
    assert {r.threads for r in runs.results.values()} == {(threads, threads)}
    assert runs.swap.event.iteration == 7 and runs.swap.swaps == 5
    for variant in VARIANTS:  # each variant's progress line, then its done line
        mine = [line for line in printed if line.startswith(variant)]
        assert (
            len(mine) == 2 and "env steps    256" in mine[0] and mine[1].startswith(f"{variant:<8} done in")
        )
    if not side_by_side:
        assert [line.split()[0] for line in printed] == [v for v in VARIANTS for _ in range(2)]


def test_a_failing_variant_stops_the_side_by_side_runs_with_its_traceback(tmp_path):
    settings = Quickstart(run_dir=str(tmp_path), threads=2)
    with pytest.raises(RuntimeError, match=r"(?s)process run failed.*ValueError: no process reward here"):
        run_variants(settings, train_fn=failing_train, print_fn=lambda line: None)


# -------------------------------------------------------------------------------------- tables
def metrics_of(successes: list[float], steps_each: float, swap: list[tuple[float, float]] | None = None):
    """A run's metrics frame: row 0 (the start's evaluation only), then one row per iteration."""
    rows = [{"iteration": 0, "rollout/cumulative_env_steps": 0.0, "eval/success": 0.9}]
    for k, s in enumerate(successes, start=1):
        row = {"iteration": k, "rollout/cumulative_env_steps": k * steps_each, "rollout/success": s}
        if swap:
            row |= {"swap/all_failure_groups_before": swap[k - 1][0], "swap/rescued_groups": swap[k - 1][1]}
        rows.append(row)
    return pd.DataFrame(rows)


def test_success_curves_and_their_summary():
    metrics = {"plain": metrics_of([0.0, 0.1, 0.2, 0.3, 0.4], 250), "rspo": metrics_of([0.1, 0.5], 380)}
    curves = success_curves(metrics)
    assert list(curves.columns) == ["variant", "iteration", "env_steps", "rollout_success"]
    assert curves[curves["variant"] == "plain"]["iteration"].tolist() == [1, 2, 3, 4, 5]  # row 0 has none
    plain, rspo = curve_summaries(curves, window=2)
    assert (plain.iterations, plain.env_steps, plain.first, plain.last) == (5, 1250, 0.05, 0.35)
    assert (rspo.first, rspo.last, rspo.window) == (pytest.approx(0.3), pytest.approx(0.3), 2)
    text = curve_text(curves, window=2)
    assert "- plain GRPO: 5 iterations to 1,250 env steps" in text and "35% in its last 2" in text


def test_rescue_table_counts_groups():
    metrics = metrics_of([0.0, 0.1, 0.2], 384, swap=[(0.75, 1.0), (0.5, 0.0), (0.25, 1.0)])
    rescues = rescue_table(metrics, tasks_per_iteration=4)
    assert rescues["all_failure_groups"].tolist() == [3, 2, 1] and rescues["rescued_groups"].tolist() == [
        1,
        0,
        1,
    ]
    assert rescues["env_steps"].tolist() == [384, 768, 1152]
    text = rescue_text(rescues, 4)
    assert "RSPO's 3 iterations (12 actor groups, one per task), 6 groups failed every episode" in text
    assert "rescued 2 groups, in 2 of the 3 iterations" in text
    one = rescue_text(rescue_table(metrics_of([0.0], 384, swap=[(0.25, 1.0)]), 4), 4)
    assert "RSPO's 1 iteration (4 actor groups, one per task), 1 group failed" in one
    assert rescue_table(metrics_of([0.1], 250), 4).empty  # a run without a swap


# ---------------------------------------------------------------------------- paired differences
def episodes(wins: dict[str, list[int]], evaluation: str = FINAL) -> pd.DataFrame:
    rows = [
        {"evaluation": evaluation, "task_id": t, "sample": i, "won": bool(w), "score": float(w)}
        for t, ws in wins.items()
        for i, w in enumerate(ws)
    ]
    return pd.DataFrame(rows)


def slow_paired(a: dict[str, list[int]], b: dict[str, list[int]], t975: float) -> tuple[float, float, float]:
    """Per shared task, the mean over shared samples of a − b; then mean ± t·s/√n over the tasks."""
    per_task = []
    for task in a:
        if task in b:
            n = min(len(a[task]), len(b[task]))
            per_task.append(sum(a[task][i] - b[task][i] for i in range(n)) / n)
    mean = sum(per_task) / len(per_task)
    half = t975 * statistics.stdev(per_task) / math.sqrt(len(per_task))
    return mean, mean - half, mean + half


def test_paired_difference_matches_a_loop_over_tasks():
    a = {"t1": [1, 1], "t2": [0, 1], "t3": [1, 0], "t4": [0, 0], "t5": [1, 1], "t6": [1, 1], "only_a": [1, 1]}
    b = {"t1": [0, 0], "t2": [0, 0], "t3": [1, 1], "t4": [0, 1], "t5": [1, 0], "t6": [0, 1], "only_b": [0, 0]}
    # rows of another evaluation must not pair (the greedy final evaluation of the same tasks)
    noise = episodes({"t1": [0, 0]}, evaluation="final/eval")
    got = paired_difference(pd.concat([episodes(a), noise]), pd.concat([episodes(b), noise]))
    mean, low, high = slow_paired(a, b, t975=2.5706)  # Student's t, 5 degrees of freedom (6 tasks): 2.5706
    assert got.mean == pytest.approx(mean)
    assert (got.ci_low, got.ci_high) == (pytest.approx(low, abs=1e-3), pytest.approx(high, abs=1e-3))
    assert (got.tasks, got.only_a, got.only_b) == (6, 5, 2)


def test_one_episode_per_task_is_the_difference_of_success_rates():
    a = {f"t{i}": [int(i % 3 == 0)] for i in range(30)}
    b = {f"t{i}": [int(i % 2 == 0)] for i in range(30)}
    got = paired_difference(episodes(a), episodes(b))
    success = lambda d: sum(v[0] for v in d.values()) / len(d)  # noqa: E731
    assert got.mean == pytest.approx(success(a) - success(b)) and got.ci_low < got.mean < got.ci_high


def test_final_success_reads_the_last_rows_interval():
    m = pd.DataFrame(
        [{"iteration": 0}, {"iteration": 1, f"{FINAL}/success": 0.25, f"{FINAL}/ci_low": 0.18,
                            f"{FINAL}/ci_high": 0.33, f"{FINAL}/tasks": 120.0}]
    )  # fmt: skip
    assert final_success(m) == FinalSuccess(0.25, 0.18, 0.33, 120)
    missing = final_success(m.iloc[:1])
    assert math.isnan(missing.success) and missing.tasks == 0


def test_summary_says_where_the_interval_lies_and_records_it():
    finals = {
        v: FinalSuccess(s, s - 0.1, s + 0.1, 120)
        for v, s in (("plain", 0.5), ("rspo", 0.6), ("process", 0.2))
    }
    summary = Summary(
        finals,
        {
            "plain": PairedDifference(0.1, -0.02, 0.22, 120, 20, 8),
            "process": PairedDifference(0.4, 0.3, 0.5, 120, 50, 2),
        },
    )
    text = summary.text()
    assert "RSPO − plain: +10.0 points [-2.0, +22.0] over 120 tasks; the interval includes zero" in text
    assert "RSPO − process: +40.0 points [+30.0, +50.0] over 120 tasks; the interval lies above zero" in text
    recorded = summary.record()
    assert recorded["rspo_success"] == 0.6 and recorded["rspo_ci"] == [0.5, 0.7]
    assert recorded["rspo_minus_process"] == 0.4 and recorded["rspo_minus_process_ci"] == [0.3, 0.5]
    table = summary.table()
    assert len(table) == 5 and table.iloc[3, 0] == "RSPO − plain" and table.iloc[3, 2] == "[-2.0, +22.0]"
    behind = Summary(finals, {"plain": PairedDifference(-0.2, -0.3, -0.1, 120, 1, 25)}).text()
    assert "lies below zero" in behind


def test_saving_and_loading_a_policy_draws_no_progress_bar(tmp_path, capfd):
    """Headless runs stay quiet: transformers' ``Writing model shards`` and ``Loading weights`` bars
    are off while a policy is saved and loaded (and back on afterwards)."""
    from transformers.utils import logging as transformers_logging

    from rspo_kit.policy.models import load_model, save_checkpoint

    model, tokenizer = load_model("tiny")
    capfd.readouterr()
    folder = save_checkpoint(model, tokenizer, {"name": "tiny"}, tmp_path / "policy")
    load_model(str(folder))
    err = capfd.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err, err
    assert transformers_logging.is_progress_bar_enabled()
