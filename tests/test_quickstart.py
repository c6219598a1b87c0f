"""The quickstart's library (rspo_kit.studies.quickstart and quickstart_tables): configs, the per-loop
line, the replayed trajectory and its clip window, the runs and plain's continuation to RSPO's env
steps, tables, paired differences at both budgets.

The paired difference is checked against a plain loop over tasks; the replayed trajectory on a
hand-built batch; ``run_variants`` with a stand-in for ``train``. The notebook itself runs in
tests/test_notebooks.py.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from rspo_kit.records.episodes import write_episodes
from rspo_kit.studies.quickstart import (
    EQUAL_STEPS,
    EQUAL_UPDATES,
    PLAIN_EQUAL_STEPS,
    VARIANTS,
    LoopLine,
    Quickstart,
    ReplayedTrajectory,
    ReplayKeeper,
    final_key,
    loop_line,
    replayed_trajectory,
    results_table,
    run_variants,
)
from rspo_kit.studies.quickstart_tables import (
    FinalSuccess,
    PairedDifference,
    Summary,
    curve_panels,
    curve_text,
    final_success,
    loop_table,
    loop_text,
    paired_difference,
    success_curves,
    summarize,
)

FINAL = final_key("eval")


# ------------------------------------------------------------------------------------- configs
def test_each_run_is_the_chain_protocol_with_the_notebooks_parameters():
    q = Quickstart(level="chain-4x2-cap10", eps=0.5, loops=3, tasks=4, group_size=2, seed=3, run_dir="out")
    modes = {v: (q.config(v).swap.mode, q.config(v).reward.train_on) for v in VARIANTS}
    assert modes == {
        "plain": ("off", "outcome"),
        "rspo": ("rspo", "outcome"),
        "dense_only": ("off", "process"),
    }
    cfg = q.config("rspo")
    assert (cfg.env.name, cfg.reward.misalign_eps, cfg.env.tasks_per_iteration, cfg.algo.group_size) == (
        "chain-4x2-cap10",
        0.5,
        4,
        2,
    )
    # the paper's loop at its defaults: k = 3, α = 1/8; every run takes loops × k updates of A
    assert (cfg.swap.loop_steps, cfg.swap.offpolicy_share, cfg.swap.sampling) == (3, 0.125, "reward")
    assert {v: q.config(v).train.updates for v in VARIANTS} == dict.fromkeys(VARIANTS, 9)
    assert Quickstart().config("rspo").env.tasks_per_iteration == 4  # the demo's B
    assert cfg.train.max_env_steps is None and (cfg.train.seed, cfg.algo.name) == (3, "grpo")
    assert cfg.train.final_eval_splits == ("eval",) and cfg.train.final_eval_n == 120
    assert cfg.train.final_eval_sampled and not cfg.train.final_eval_greedy
    assert cfg.train.eval_n == 0  # the curve is the rollouts' own sampled success
    assert cfg.train.run_dir == "out/rspo" and not cfg.train.progress_bar
    assert cfg.policy.warmstart_from and cfg.policy.warmstart_from.startswith("data/warm_starts/chain4x2")
    default = Quickstart(tasks=None).config("plain")  # None keeps the protocol's B and N
    assert (default.env.tasks_per_iteration, default.algo.group_size) == (8, 8)
    assert q.config("plain").train.threads == 1  # side by side: 2 threads shared by 3 runs, 1 each
    with pytest.raises(ValueError, match="'control' is not allowed"):
        q.config("control")


# ----------------------------------------------------------------------------------- callbacks
LOOP_METRICS = {
    "budget/actor_updates": 3.0,
    "budget/env_steps": 4321.0,
    "explorer/dense_before": 0.412,
    "explorer/dense_after": 0.655,
    "swap/collect_success": 0.25,
    "swap/replayed": 24.0,
    "swap/drawn_success_share": 0.75,
    "rollout/success": 0.375,
}


def test_loop_line_says_what_one_loop_did():
    assert loop_line("rspo", 1, LOOP_METRICS) == (
        "rspo       loop   1  A updates   3  env steps  4,321  B dense 0.41 → 0.66  collection success 0.25"
        "  drew 24 (75% won)  A success 0.38"
    )
    plain = {"budget/actor_updates": 2.0, "budget/env_steps": 700.0, "rollout/success": 0.5}
    assert (
        loop_line("plain", 2, plain)
        == "plain      update   2  A updates   2  env steps    700  A success 0.50"
    )
    assert loop_line("plain", 1, {}).endswith("A success nan")
    lines: list[str] = []
    LoopLine("rspo", lines.append).on_update_end(SimpleNamespace(iteration=1, metrics=LOOP_METRICS))
    assert lines == [loop_line("rspo", 1, LOOP_METRICS)]


@dataclass
class Step:
    action: str
    logprob: float
    dense: float
    token_logprobs: list = field(default_factory=list)
    candidates: list | None = field(default_factory=lambda: [[1], [2]])


@dataclass
class Traj:
    task_id: str
    won: bool
    steps: list
    source: str = "actor"


class Rewards:
    """The two reward readings the quickstart makes: the dense reward per step and the outcome."""

    def process_steps(self, traj):
        return [s.dense for s in traj.steps]

    def outcome_return(self, traj):
        return float(traj.won)


def traj(task: str, won: bool, n: int, source: str = "actor") -> Traj:
    return Traj(task, won, [Step(f"{task} a{i}", math.log(0.5), 0.1 * (i + 1)) for i in range(n)], source)


def updated_batch(trajs, offpolicy, stored, centers):
    """An ``UpdateBatch`` as ``update`` leaves it: outcome rewards and each step's clip centre."""
    rewards = [[0.0] * (len(t.steps) - 1) + [float(t.won)] for t in trajs]
    flat = [torch.tensor([c]) for c in centers]
    return SimpleNamespace(
        trajs=trajs, offpolicy=offpolicy, stored_advantages=stored, rewards=rewards, clip_centers=flat
    )


def test_replayed_trajectory_prefers_a_won_draw_that_carries_signal():
    on, lost, flat_win, signal_win = (
        traj("t0", True, 2),
        traj("t1", False, 2),
        traj("t2", True, 1),
        traj("t3", True, 3),
    )
    first = updated_batch([on, lost], [False, True], [None, [-0.5, -0.5]], [1.0, 1.0, 0.9, 0.9])
    # a won draw of an all-success group (A_off 0), then the one to show: won, with advantage 1.2
    second = updated_batch(
        [on, flat_win, signal_win],
        [False, True, True],
        [None, [0.0], [1.2] * 3],
        [1.0, 1.0, 0.8, 0.6, 0.4, 0.5],
    )
    shown = replayed_trajectory([first, second], Rewards(), loop=4, clip_low=0.2, clip_high=0.3)
    assert (shown.loop, shown.actor_step, shown.task, shown.won, shown.outcome) == (4, 2, "t3", True, 1.0)
    assert shown.dense_return == pytest.approx(0.6)
    s = shown.steps
    assert s["action"].tolist() == ["t3 a0", "t3 a1", "t3 a2"] and s["stored_advantage"].tolist() == [1.2] * 3
    assert s["dense_reward"].tolist() == pytest.approx([0.1, 0.2, 0.3]) and s["outcome_reward"].tolist() == [
        0,
        0,
        1,
    ]
    assert s["center"].tolist() == pytest.approx(
        [0.6, 0.4, 0.5]
    )  # its own steps' centres, not its neighbours'
    assert s["pi_B"].tolist() == pytest.approx([0.5] * 3) and s["pi_old"].tolist() == pytest.approx(
        [0.3, 0.2, 0.25]
    )
    assert s["low"].tolist() == pytest.approx([0.4, 0.2, 0.3]) and s["high"].tolist() == pytest.approx(
        [0.9, 0.7, 0.8]
    )
    assert "loop 4, A's update 2: a trajectory of B on t3, won (outcome 1)" in shown.text()
    # without a won draw, the first replayed one; without any draw, none
    assert replayed_trajectory([first], Rewards(), 1, 0.2, 0.2).task == "t1"
    only_on = updated_batch([on], [False], [None], [1.0, 1.0])
    assert replayed_trajectory([only_on], Rewards(), 1, 0.2, 0.2) is None


def test_replay_keeper_keeps_the_first_loop_with_a_won_draw():
    lost = updated_batch([traj("t1", False, 1)], [True], [[-1.0]], [0.9])
    won = updated_batch([traj("t2", True, 1)], [True], [[1.0]], [0.8])
    later = updated_batch([traj("t3", True, 1)], [True], [[1.0]], [0.7])
    keeper = ReplayKeeper(Rewards(), 0.2, 0.2)
    for k, batch in enumerate([lost, won, later], 1):
        keeper.on_update_end(SimpleNamespace(iteration=k, data={"batches": [batch]}))
        if k == 1:
            assert keeper.kept.task == "t1"  # a lost draw stands in until a won one comes
    assert (keeper.kept.loop, keeper.kept.task) == (2, "t2")


# ------------------------------------------------------------------------------------------ runs
def spending(run_dir: str, updates: int, steps_each: int) -> pd.DataFrame:
    rows = [{"iteration": 0, "budget/actor_updates": 0.0, "budget/env_steps": 0.0}]
    rows += [
        {"iteration": k, "budget/actor_updates": float(k), "budget/env_steps": float(k * steps_each),
         "rollout/success": 0.5}
        for k in range(1, updates + 1)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def stand_in_train(cfg, callbacks, resume=None):
    """``train``'s stand-in (module level: side-by-side runs pickle it into their processes): a line per
    run, RSPO's keeper given a trajectory, a run folder with final episodes, and the call recorded."""
    run_dir = Path(resume or cfg.train.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_dict()))
    (run_dir / "metrics.jsonl").write_text("{}\n")
    write_episodes(run_dir, FINAL, [{"task_id": "a", "sample": 0, "won": True, "score": 1.0, "steps": 3}])
    steps_each = 900 if cfg.swap.mode == "rspo" else 300
    for cb in callbacks:
        if isinstance(cb, LoopLine):
            cb.on_update_end(SimpleNamespace(iteration=1, metrics={"budget/env_steps": float(steps_each)}))
        if isinstance(cb, ReplayKeeper):
            cb.kept = ReplayedTrajectory(7, 1, "t", True, 1.0, 0.5, pd.DataFrame({"step": [0]}))
    updates = cfg.train.updates or -(-cfg.train.max_env_steps // steps_each)  # on to the env-step budget
    call = (cfg.swap.mode, cfg.reward.train_on, [type(c).__name__ for c in callbacks], cfg.train.updates)
    return SimpleNamespace(
        run_dir=str(run_dir),
        metrics=spending(str(run_dir), updates, steps_each),
        call=call,
        resume=resume,
        max_env_steps=cfg.train.max_env_steps,
        threads=(torch.get_num_threads(), cfg.train.threads),
    )


def failing_train(cfg, callbacks, resume=None):
    if cfg.reward.train_on == "process":
        raise ValueError("no dense reward here")
    return stand_in_train(cfg, callbacks, resume)


EXPECTED_CALLS = {
    "plain": ("off", "outcome", ["LoopLine"], 6),
    "rspo": ("rspo", "outcome", ["LoopLine", "ReplayKeeper"], 6),
    "dense_only": ("off", "process", ["LoopLine"], 6),
    PLAIN_EQUAL_STEPS: ("off", "outcome", ["LoopLine"], None),
}


@pytest.mark.parametrize("side_by_side", [False, True], ids=["one_after_another", "side_by_side"])
def test_run_variants_trains_each_then_runs_plain_on_to_rspos_env_steps(tmp_path, side_by_side):
    printed: list[str] = []
    settings = Quickstart(run_dir=str(tmp_path), threads=3, side_by_side=side_by_side)
    runs = run_variants(settings, train_fn=stand_in_train, print_fn=printed.append)
    assert {v: r.call for v, r in runs.results.items()} == EXPECTED_CALLS
    assert list(runs.results) == [*VARIANTS, PLAIN_EQUAL_STEPS] and set(runs.seconds) == set(runs.results)
    assert runs.run_dirs["rspo"] == tmp_path / "rspo"
    # side by side: 3 threads shared by 3 processes; one after another: all 3 for each run
    threads = 1 if side_by_side else 3
    assert {runs.results[v].threads for v in VARIANTS} == {(threads, threads)}
    assert runs.replayed.loop == 7
    # plain's run copied without its final episodes and resumed to RSPO's 6 × 900 env steps
    on = runs.results[PLAIN_EQUAL_STEPS]
    assert on.resume == tmp_path / PLAIN_EQUAL_STEPS and on.max_env_steps == 5400 and on.threads == (3, 3)
    assert (tmp_path / PLAIN_EQUAL_STEPS / "metrics.jsonl").is_file()
    for variant in VARIANTS:  # each variant's line, then its done line
        mine = [line for line in printed if line.startswith(f"{variant} ")]
        assert len(mine) >= 2 and "env steps" in mine[0] and f"{variant:<10} done in" in "\n".join(mine)
    assert any("runs on to RSPO's 5,400 env steps" in line for line in printed)
    alone = run_variants(
        Quickstart(run_dir=str(tmp_path / "alone"), equal_env_steps=False, side_by_side=False),
        train_fn=stand_in_train,
        print_fn=lambda line: None,
    )
    assert list(alone.results) == list(VARIANTS)


def test_a_failing_variant_stops_the_side_by_side_runs_with_its_traceback(tmp_path):
    settings = Quickstart(run_dir=str(tmp_path), threads=2)
    with pytest.raises(RuntimeError, match=r"(?s)dense_only run failed.*ValueError: no dense reward here"):
        run_variants(settings, train_fn=failing_train, print_fn=lambda line: None)


# -------------------------------------------------------------------------------------- tables
def curve_metrics(successes: list[float], steps_each: float, updates_each: int = 1) -> pd.DataFrame:
    rows = [{"iteration": 0, "budget/env_steps": 0.0, "budget/actor_updates": 0.0, "eval/success": 0.9}]
    for k, s in enumerate(successes, start=1):
        rows.append(
            {"iteration": k, "budget/env_steps": k * steps_each, "budget/actor_updates": float(k * updates_each),
             "rollout/success": s}
        )  # fmt: skip
    return pd.DataFrame(rows)


def test_success_curves_in_two_panels_with_plain_run_on():
    metrics = {
        "plain": curve_metrics([0.0, 0.1], 250),
        "rspo": curve_metrics([0.1, 0.5], 750, updates_each=3),
        PLAIN_EQUAL_STEPS: curve_metrics([0.0, 0.1, 0.2, 0.3, 0.4, 0.6], 250),
    }
    curves = success_curves(metrics)
    assert list(curves.columns) == ["run", "iteration", "actor_updates", "env_steps", "rollout_success"]
    assert curves["run"].unique().tolist() == ["plain", "rspo"]  # plain's curve: its continued run
    plain = curves[curves["run"] == "plain"]
    assert plain["iteration"].tolist() == [1, 2, 3, 4, 5, 6] and plain["env_steps"].iloc[-1] == 1500
    assert curves[curves["run"] == "rspo"]["actor_updates"].tolist() == [3, 6]
    panels = curve_panels(curves)
    assert set(panels["budget"]) == {"updates of A", "env steps (actor + explorer)"} and len(panels) == 16
    rspo_steps = panels[(panels["run"] == "rspo") & (panels["budget"].str.startswith("env"))]
    assert rspo_steps["spent"].tolist() == [750, 1500] and rspo_steps["rollout_success"].tolist() == [
        0.1,
        0.5,
    ]
    text = curve_text(curves, window=2)
    assert (
        "- RSPO-GRPO: 6 updates of A, 1,500 env steps; sampled success 30% over its first 2 iterations"
        in text
    )
    assert "- plain GRPO: 6 updates of A, 1,500 env steps" in text and "50% over its last 2" in text


def test_loop_table_has_one_row_per_loop_of_the_printed_numbers():
    rows = [{"iteration": 0, "budget/env_steps": 0.0, "budget/actor_updates": 0.0}]
    for k, (before, after, collect) in enumerate([(0.4, 0.6, 0.25), (0.5, 0.45, 0.5)], 1):
        rows.append(
            {**LOOP_METRICS, "iteration": k, "budget/actor_updates": 3.0 * k, "explorer/dense_before": before,
             "explorer/dense_after": after, "swap/collect_success": collect, "explorer/success_before": 0.125,
             "swap/drawn_outcome_mean": 1.0, "swap/drawn_advantage_mean": 0.8}
        )  # fmt: skip
    loops = loop_table(pd.DataFrame(rows))
    assert loops["loop"].tolist() == [1, 2] and loops["actor_updates"].tolist() == [3, 6]
    assert loops["B_dense_after"].tolist() == [0.6, 0.45] and loops["drawn"].tolist() == [24, 24]
    assert loops.columns[-1] == "A_success" and loops["A_success"].tolist() == [0.375, 0.375]
    text = loop_text(loops)
    assert "Over RSPO's 2 loops, B's dense return rose in 1 (mean 0.45 → 0.53)" in text
    assert "collections won 38% of their episodes, against 12% for B = A" in text
    assert "drew 48 trajectories for A, 75% of them won" in text
    assert loop_table(curve_metrics([0.1], 250)).empty and loop_text(
        loop_table(curve_metrics([0.1], 250))
    ) == ("RSPO ran no loop.")


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
    got = paired_difference(pd.concat([episodes(a), noise]), pd.concat([episodes(b), noise]), FINAL)
    mean, low, high = slow_paired(a, b, t975=2.5706)  # Student's t, 5 degrees of freedom (6 tasks): 2.5706
    assert got.mean == pytest.approx(mean)
    assert (got.ci_low, got.ci_high) == (pytest.approx(low, abs=1e-3), pytest.approx(high, abs=1e-3))
    assert (got.tasks, got.only_a, got.only_b) == (6, 5, 2)


def test_one_episode_per_task_is_the_difference_of_success_rates():
    a = {f"t{i}": [int(i % 3 == 0)] for i in range(30)}
    b = {f"t{i}": [int(i % 2 == 0)] for i in range(30)}
    got = paired_difference(episodes(a), episodes(b), FINAL)
    success = lambda d: sum(v[0] for v in d.values()) / len(d)  # noqa: E731
    assert got.mean == pytest.approx(success(a) - success(b)) and got.ci_low < got.mean < got.ci_high


def test_final_success_reads_the_last_rows_interval_and_spending():
    m = pd.DataFrame(
        [{"iteration": 0}, {"iteration": 2, f"{FINAL}/success": 0.25, f"{FINAL}/ci_low": 0.18,
                            f"{FINAL}/ci_high": 0.33, f"{FINAL}/tasks": 120.0, "budget/actor_updates": 6.0,
                            "budget/env_steps": 4321.0}]
    )  # fmt: skip
    assert final_success(m, FINAL) == FinalSuccess(0.25, 0.18, 0.33, 120, 6, 4321)
    missing = final_success(m.iloc[:1], FINAL)
    assert math.isnan(missing.success) and missing.tasks == 0


def summary_of(**differences: PairedDifference) -> Summary:
    finals = {
        run: FinalSuccess(s, s - 0.1, s + 0.1, 120, updates, steps)
        for run, s, updates, steps in (
            ("plain", 0.5, 6, 2000), ("rspo", 0.6, 6, 5000), ("dense_only", 0.2, 6, 2100),
            (PLAIN_EQUAL_STEPS, 0.7, 15, 5100),
        )
    }  # fmt: skip
    keys = {
        "plain": (EQUAL_UPDATES, "rspo", "plain"),
        "dense_only": (EQUAL_UPDATES, "rspo", "dense_only"),
        "on": (EQUAL_STEPS, "rspo", PLAIN_EQUAL_STEPS),
    }
    return Summary(finals, {keys[name]: d for name, d in differences.items()})


def test_summary_says_where_each_budgets_interval_lies_and_records_it():
    summary = summary_of(
        plain=PairedDifference(0.1, -0.02, 0.22, 120, 20, 8),
        dense_only=PairedDifference(0.4, 0.3, 0.5, 120, 50, 2),
        on=PairedDifference(-0.1, -0.2, -0.01, 120, 5, 17),
    )
    text = summary.text()
    assert (
        "- at equal updates of A: RSPO-GRPO − plain GRPO = +10.0 points [-2.0, +22.0] over 120 tasks; "
        "the interval includes zero" in text
    )
    assert (
        "GRPO on the dense reward alone = +40.0 points [+30.0, +50.0] over 120 tasks; the interval lies above"
        in text
    )
    assert "- at equal env steps: RSPO-GRPO − plain GRPO, run on to RSPO's env steps = -10.0" in text
    assert "rspo measurably behind" in text
    recorded = summary.record()
    assert recorded["rspo_success"] == 0.6 and recorded["rspo_ci"] == pytest.approx([0.5, 0.7])
    assert recorded["actor_updates"] == {"plain": 6, "rspo": 6, "dense_only": 6, PLAIN_EQUAL_STEPS: 15}
    assert recorded["env_steps"] == {"plain": 2000, "rspo": 5000, "dense_only": 2100, PLAIN_EQUAL_STEPS: 5100}
    assert recorded["rspo_minus_dense_only"] == 0.4 and recorded["rspo_minus_dense_only_ci"] == [0.3, 0.5]
    assert recorded[f"rspo_minus_{PLAIN_EQUAL_STEPS}"] == -0.1 and recorded["rspo_minus_plain_tasks"] == 120
    table = summary.table()
    assert table["budget"].tolist() == [EQUAL_UPDATES] * 5 + [EQUAL_STEPS] * 3
    assert (
        table.iloc[3]["run"] == "RSPO-GRPO − plain GRPO" and table.iloc[3]["95% interval"] == "[-2.0, +22.0]"
    )
    assert table.iloc[5]["updates of A"] == "6" and table.iloc[6]["env steps"] == "5,100"
    printed = results_table(recorded)
    assert printed.startswith("at equal updates of A:\n") and "\nat equal env steps:\n" in printed
    assert "15 updates of A    5,100 env steps   70.0% [60.0, 80.0]" in printed
    assert "-10.0 [-20.0, -1.0] over 120 paired tasks" in printed


def test_summarize_pairs_the_runs_final_episodes(tmp_path):
    wins = {
        "plain": [1, 0, 0, 0],
        "rspo": [1, 1, 0, 1],
        "dense_only": [0, 0, 0, 0],
        PLAIN_EQUAL_STEPS: [1, 1, 1, 0],
    }
    dirs, metrics = {}, {}
    for run, w in wins.items():
        dirs[run] = tmp_path / run
        rows = [
            {"task_id": f"t{i}", "sample": 0, "won": bool(x), "score": float(x), "steps": 3}
            for i, x in enumerate(w)
        ]
        write_episodes(dirs[run], FINAL, rows)
        metrics[run] = pd.DataFrame([{"iteration": 1, f"{FINAL}/success": sum(w) / 4}])
    summary = summarize(dirs, metrics, FINAL)
    got = {key: d.mean for key, d in summary.differences.items()}
    assert got == {
        (EQUAL_UPDATES, "rspo", "plain"): 0.5,
        (EQUAL_UPDATES, "rspo", "dense_only"): 0.75,
        (EQUAL_STEPS, "rspo", PLAIN_EQUAL_STEPS): 0.0,
    }
    without = summarize({v: dirs[v] for v in VARIANTS}, {v: metrics[v] for v in VARIANTS}, FINAL)
    assert [key[0] for key in without.differences] == [EQUAL_UPDATES, EQUAL_UPDATES]


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
