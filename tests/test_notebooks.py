"""Every notebook runs headless under papermill with tiny parameters, and records sane results.

Each notebook runs as a person would run it, minus the widgets (``INTERACTIVE=False``), on the
``smoke`` preset (seconds) with one torch thread; the assertions read what its last cell recorded
(``RSPO_RESULTS``). The committed notebooks themselves must be stripped and follow the hygiene rules.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
from pathlib import Path

import nbformat
import papermill
import pytest

from rspo_kit.experiments import ensure_kernel
from rspo_kit.experiments.cells import HEADLESS_ENV
from rspo_kit.experiments.grid import cell_name
from rspo_kit.records import read_results, save_figure

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SMOKE = {"PRESET": "smoke", "WARMSTART": False, "MAX_STEPS": 6}  # the trainer at seconds per run
TESTED = {
    "00_quickstart",
    "01_environments_and_rewards",
    "02_trajectory_sampling",
    "03_reward_swap",
    "04_training",
    "05_misalignment_debugger",
    "06_experiments",
    "07_regime_map",
}


@pytest.fixture(scope="session")
def kernel() -> str:
    return ensure_kernel()


def execute(name: str, kernel: str, out_dir: Path, **parameters) -> dict:
    """Run ``notebooks/<name>.ipynb`` headless into ``out_dir``; return what it recorded."""
    import papermill as pm

    out = out_dir / f"{name}.ipynb"
    params = {"INTERACTIVE": False, "THREADS": 1, **parameters}
    env = os.environ.copy()
    os.environ.update(HEADLESS_ENV)  # inherited by the kernel
    try:
        pm.execute_notebook(
            NOTEBOOKS / f"{name}.ipynb",
            out,
            parameters=params,
            kernel_name=kernel,
            progress_bar=False,
            cwd=str(ROOT),
        )
    finally:
        os.environ.clear()
        os.environ.update(env)
    return read_results(out)


def finite(*values) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def check_run(results: dict, iterations: int) -> None:
    """The keys every training notebook records about its run."""
    assert results["iterations"] == iterations
    lo, mid, hi = results["final_ci_low"], results["final_success"], results["final_ci_high"]
    assert finite(lo, mid, hi, results["final_score"], results["env_steps"], results["start_success"])
    assert 0 <= lo <= mid <= hi <= 1 and results["env_steps"] > 0
    steps, success = results["curve_env_steps"], results["curve_success"]
    assert len(steps) == len(success) == iterations + 1  # eval every iteration, row 0 included
    assert steps[0] == 0 and steps == sorted(steps) and steps[-1] == results["env_steps"]
    assert all(0 <= s <= 1 for s in success)


# ------------------------------------------------------------------------------------ the notebooks
def test_00_quickstart_compares_plain_rspo_and_dense_only_at_both_budgets(kernel, tmp_path):
    # one loop of RSPO (3 updates of A) on 4 tasks x 2 episodes, the shortest chain level, 4 eval tasks:
    # the three runs, plain's run on to RSPO's env steps and every section in seconds
    run_dir = tmp_path / "run"
    params = dict(LEVEL="chain-4x2-cap8", LOOPS=1, TASKS=4, GROUP_SIZE=2, FINAL_N=4, RUN_DIR=str(run_dir))
    results = execute("00_quickstart", kernel, tmp_path, **params)
    runs = ("plain", "rspo", "dense_only", "plain_equal_env_steps")
    for run in runs:
        low, high = results[f"{run}_ci"]
        assert 0 <= low <= results[f"{run}_success"] <= high <= 1
        assert (run_dir / run / "final_episodes.parquet").is_file()
    updates, steps = results["actor_updates"], results["env_steps"]
    assert set(updates) == set(steps) == set(runs)
    assert updates["plain"] == updates["rspo"] == updates["dense_only"] == 3  # equal updates of A
    assert steps["rspo"] > steps["plain"]  # B's rollouts come on top
    # plain ran on from its own 3 updates to the first update at or past RSPO's env steps
    assert updates["plain_equal_env_steps"] > 3 and steps["plain_equal_env_steps"] >= steps["rspo"]
    for other in ("plain", "dense_only", "plain_equal_env_steps"):  # 4 tasks, one episode each
        difference, (low, high) = results[f"rspo_minus_{other}"], results[f"rspo_minus_{other}_ci"]
        assert difference == pytest.approx(results["rspo_success"] - results[f"{other}_success"])
        assert results[f"rspo_minus_{other}_tasks"] == 4
        assert low is None or low <= difference <= high  # None: all four pairs equal, no spread
    assert results["loops"] == 1 and results["drawn"] == [3]  # round(α·B·N) = 1 per update of A, k = 3
    assert 0 <= results["collect_success"][0] <= 1 and finite(*results["explorer_dense_before"])
    assert results["replayed_example"].startswith("loop 1, A's update ")
    assert json.loads((run_dir / "results.json").read_text()) == results
    assert (run_dir / "success_curves.html").is_file()
    shown = json.loads((tmp_path / "00_quickstart.ipynb").read_text())["cells"]
    printed = "".join("".join(o.get("text", "")) for c in shown for o in c.get("outputs", []))
    assert "rspo       loop   1  A updates   3" in printed and "B dense" in printed  # a line per loop
    assert "runs on to RSPO's" in printed and "at equal env steps" in printed
    assert "Loading weights" not in printed  # headless output without transformers' loading bars


def test_01_environments_and_rewards(kernel, tmp_path):
    results = execute(
        "01_environments_and_rewards",
        kernel,
        tmp_path,
        N_TASKS=3,
        DETOURS=[0.0, 1.0],
        EPS_VALUES=[0.0, 0.5, 1.0],
        MAX_STEPS=20,
        RUN_DIR=str(tmp_path / "run"),
    )
    # the expert episodes: won, and a potential-based subgoal return of exactly final - initial = 1
    assert results["alfworld_expert_won"] == 1.0 and 1 <= results["alfworld_expert_steps"] <= 20
    assert results["alfworld_subgoal_return"] == pytest.approx(1.0)
    assert results["webshop_expert_score"] == pytest.approx(100.0)
    assert results["webshop_subgoal_return"] == pytest.approx(1.0)
    assert results["n_episodes"] == 6 and 0 < results["success_rate"] < 1
    # the knob: aligned, the dense reward ranks the expert above the random walker; hackable, it does not
    assert results["tau_aligned"] > 0.5 > results["tau_misaligned"]
    assert 0 <= results["hacking_aligned"] < results["hacking_misaligned"] <= 1
    assert set(results["tau_by_eps"]) == {"0.0", "0.5", "1.0"}
    assert (tmp_path / "run" / "misalignment_knob.html").is_file()


def test_02_trajectory_sampling(kernel, tmp_path):
    results = execute("02_trajectory_sampling", kernel, tmp_path, N_STEPS=2, GROUP_SIZE=2, MAX_STEPS=6)
    assert results["prompt_tokens"] > 0 and results["n_candidates"] >= 2
    assert results["probs_sum"] == pytest.approx(1.0, abs=1e-5)
    assert results["manual_steps"] == 2 and 0 < results["mean_chosen_prob"] <= 1
    assert results["group_size"] == 2 and 1 <= results["mean_episode_steps"] <= 6
    assert 0 <= results["group_success"] <= 1 and finite(results["advantage_abs_mean"])
    assert results["logprob_recompute_error"] < 1e-4  # the stored behaviour log-prob is the model's


def test_03_one_loop_of_rspo(kernel, tmp_path):
    results = execute(
        "03_reward_swap", kernel, tmp_path, **SMOKE, LOOPS=2, LOOP_STEPS=2, RUN_DIR=str(tmp_path / "run")
    )
    assert (
        results["loops"] == 2 and results["actor_updates"] == results["explorer_updates"] == 4
    )  # k = 2 a loop
    assert results["collected"] == 4  # smoke: round(2 * (1 - 1/2) * 2) = 2 tasks x 2
    assert results["replayed"] == 2 * 2  # round(α·B·N) = 2 per update of A, k = 2
    assert results["relabel_error"] == 0.0  # A saw outcome rewards only
    assert finite(results["explorer_dense_before"], results["explorer_dense_after"])
    assert results["drawn_outcome_mean"] >= results["stored_outcome_mean"]  # reward-based: the best first
    assert 0 <= results["centers_moved"] <= 1


def test_04_training_ppo_control_and_its_continuation(kernel, tmp_path):
    run_dir = tmp_path / "run"
    overrides = {"train.final_eval_split": "eval,eval_unseen", "train.final_eval_n": 3}
    overrides |= {"train.final_eval_sampled": True, "swap.explorer_lr": 2e-4}
    overrides |= {"reward.outcome_mode": "score"}  # score: on ALFWorld the same as success
    params = dict(PRESET="smoke", ALGO="ppo", VARIANT="control", RUN_DIR=str(run_dir), OVERRIDES=overrides)
    results = execute("04_training", kernel, tmp_path, **params, ITERATIONS=2)
    check_run(results, iterations=2)
    assert (results["variant"], results["algo"], results["outcome_mode"]) == ("control", "ppo", "score")
    # the control's loops: k = 2 updates of A each, none of B (B = A); curves against both budgets
    assert results["actor_updates"] == 4 and results["explorer_updates"] == 0
    assert results["curve_actor_updates"] == [0, 2, 4] and len(results["curve_env_steps"]) == 3
    assert results["preset"] == "smoke"
    assert 0 <= results["rollout_success"] <= 1 and results["best_success"] >= results["final_success"]
    for split in ("eval", "eval_unseen"):  # the test splits, evaluated once at the end
        for kind in ("final", "final_sampled"):  # greedy, and sampled
            lo, mid, hi = (results[f"{kind}_{split}_{key}"] for key in ("ci_low", "success", "ci_high"))
            assert 0 <= lo <= mid <= hi <= 1
    assert (run_dir / "success_vs_env_steps.html").is_file() and (run_dir / "health.html").is_file()
    assert json.loads((run_dir / "config.json").read_text())["swap"]["explorer_lr"] == 2e-4
    # the score curve at the same evaluations; ALFWorld's score is its success (1.0 or 0 per episode)
    assert results["curve_score"] == pytest.approx(results["curve_success"])

    # run again on the same RUN_DIR with a longer budget (a killed sweep cell rerun): it continues
    (tmp_path / "again").mkdir()
    params["OVERRIDES"] = json.dumps(overrides)  # as `papermill -p OVERRIDES '{...}'` passes it: text
    continued = execute("04_training", kernel, tmp_path / "again", **params, ITERATIONS=3)
    check_run(continued, iterations=3)
    assert continued["curve_success"][:3] == results["curve_success"]
    assert continued["curve_score"][:3] == results["curve_score"]
    assert "continuing the run in" in (tmp_path / "again" / "04_training.ipynb").read_text()


def test_05_misalignment_debugger(kernel, tmp_path):
    # WebShop with a hackable share: its navigation clicks earn process reward without success
    results = execute(
        "05_misalignment_debugger",
        kernel,
        tmp_path,
        **SMOKE,
        ENV="webshop",
        SWAP=True,
        ITERATIONS=2,
        MISALIGN_EPS=0.5,
        EVAL_N=0,
        EPS_VALUES=[0.0, 1.0],
        RUN_DIR=str(tmp_path / "run"),
    )
    assert results["trajectories"] == 8 and results["groups"] == 4  # 2 iterations x 2 tasks x G=2
    assert results["rescore_error"] < 1e-9  # turn tables reproduce the run's process rewards
    assert 0 <= results["groups_with_tau"] <= results["groups"]
    tau = results["kendall_tau"]
    assert (tau is None) == (results["groups_with_tau"] == 0) and (tau is None or -1 <= tau <= 1)
    assert 0 <= results["hacking_rate"] <= 1 and 0 <= results["step_disagreement"] <= 1
    assert set(results["hacking_by_eps"]) == {"0.0", "1.0"} == set(results["tau_by_eps"])
    assert (tmp_path / "run" / "misalignment" / "process_vs_outcome.html").is_file()
    # the committed progress model beside the hand-written reward, on the trained actor's fresh episodes
    assert results["progress_model"].endswith("data/progress_models/webshop")
    assert {"learned_tau", "learned_auc", "handwritten_tau", "handwritten_auc"} <= set(results)
    assert (tmp_path / "run" / "misalignment" / "learned_vs_handwritten.html").is_file()
    # debugging a finished run writes beside its records, never over them (e.g. notebook 04's results.json)
    own = tmp_path / "run" / "results.json"
    own.write_text('{"final_eval_success": 0.25}\n')
    (tmp_path / "again").mkdir()
    again = execute(
        "05_misalignment_debugger",
        kernel,
        tmp_path / "again",
        DEBUG_RUN=str(tmp_path / "run"),
        EPS_VALUES=[0.0],
    )
    assert own.read_text() == '{"final_eval_success": 0.25}\n'
    assert again["trajectories"] == 8 and json.loads(
        (own.parent / "misalignment" / "results.json").read_text()
    )


def test_06_experiments_sweeps_notebook_04(kernel, tmp_path):
    out = tmp_path / "sweep"
    results = execute(
        "06_experiments",
        kernel,
        tmp_path,
        NOTEBOOK=str(NOTEBOOKS / "04_training.ipynb"),
        PRESET="smoke",
        GRID={"variant": ["rspo", "plain"], "train.seed": [0]},
        CELL_PARAMETERS={
            **{"train.iterations": 1, "THREADS": 1, "train.final_eval_split": "eval_unseen"},
            "swap.loop_steps": 1,
            # a warm start that never saw this kind (none is built here): eval_unseen's first two
            # tasks, which the cells end on, are one of it and one of another kind
            "policy.sft_exclude_kinds": "look_at_obj_in_light",
            **{"swap.sampling": "variance", "swap.offpolicy_clip": "none"},  # the ablations' knobs reach it
        },
        OUT=str(out),
        WORKERS=1,
    )
    assert (results["cells"], results["finished"], results["failed"]) == (2, 2, 0)
    assert set(results["means"]) == {"rspo", "plain"} and all(0 <= m <= 1 for m in results["means"].values())
    assert results["best_group"] in results["means"] and 0 <= results["best_mean"] <= 1
    for name in (
        "results.csv",
        "summary.csv",
        "curves.html",
        "curves_updates.html",
        "kinds.html",
        "variant=rspo__train.seed=0.ipynb",
    ):
        assert (out / name).is_file()
    # success by task kind: each variant on the kind left out and on the kinds shown
    halves = {"left_out_kinds final/eval_unseen", "sft_kinds final/eval_unseen"}
    assert results["left_out_kinds"] == ["look_at_obj_in_light"]
    assert {v: set(m) for v, m in results["kind_means"].items()} == {"rspo": halves, "plain": halves}
    assert all(0 <= x <= 1 for m in results["kind_means"].values() for x in m.values())
    configs = {
        v: json.loads((out / f"variant={v}__train.seed=0" / "config.json").read_text())
        for v in ("rspo", "plain")
    }
    assert (configs["rspo"]["swap"]["mode"], configs["plain"]["swap"]["mode"]) == ("rspo", "off")
    swap = configs["rspo"]["swap"]
    assert swap["loop_steps"] == 1 and configs["rspo"]["train"]["iterations"] == 1
    assert (swap["sampling"], swap["offpolicy_clip"]) == ("variance", "none")
    executed = (tmp_path / "06_experiments.ipynb").read_text()
    assert "| variant | seeds | actor_updates | explorer_steps_share |" in executed  # the runs' statistics
    assert "| explorer_success | explorer_minus_actor_success |" in executed  # B's collection against A
    assert "| dense_before | dense_after | collect_success | drawn_success_share |" in executed  # the loop
    printed = "".join(
        "".join(o.get("text", "")) for c in json.loads(executed)["cells"] for o in c.get("outputs", [])
    )
    assert "| difference | seeds | final_success |" in printed  # RSPO − plain, paired by seed
    assert "| variant=rspo \u2212 variant=plain | 0 | " in printed
    # and task by task, from the cells' final episodes (eval_unseen, evaluated at the end)
    assert "| difference | seeds | evaluation | tasks | episodes won only by a / b | success |" in printed
    assert "| variant=rspo \u2212 variant=plain | 0 | final/eval_unseen | 2 | " in printed

    # summarise a sweep without running it (one still running in the background, or half done)
    (tmp_path / "summary").mkdir()
    grid = {"variant": ["rspo", "plain"], "train.seed": [0, 1]}
    summary = execute(
        "06_experiments",
        kernel,
        tmp_path / "summary",
        GRID=grid,
        OUT=str(out),
        RUN_CELLS=False,
        CURVE="curve_score",
        REFERENCE=str(
            out / "variant=plain__train.seed=0"
        ),  # e.g. the warm start; here plain: plain's row is 0
    )
    assert (summary["cells"], summary["finished"], summary["failed"]) == (4, 2, 0)
    printed = "".join(
        "".join(o.get("text", ""))
        for c in json.loads((tmp_path / "summary" / "06_experiments.ipynb").read_text())["cells"]
        for o in c.get("outputs", [])
    )
    assert (
        "| variant | seeds | evaluation | tasks | episodes won only by the runs / the reference |" in printed
    )
    assert "| plain | 0 | final/eval_unseen | 2 | 0 / 0 | +0.0 [+0.0, +0.0] |" in printed
    assert "curve_score vs env steps" in (out / "curves.html").read_text()  # the score curves instead
    assert summary["means"] == results["means"] and not (out / "variant=rspo__train.seed=1.ipynb").exists()

    # summarise several folders as one sweep, here an archive of this one and a copy of it as seed 1 (two
    # committed archives of different seeds): they are only read; the pooled tables go to OUT
    from rspo_kit.experiments.archive import archive_sweep

    archive_sweep(out, tmp_path / "seed0")
    shutil.copytree(tmp_path / "seed0", tmp_path / "seed1")
    manifest = json.loads((tmp_path / "seed1" / "sweep.json").read_text())
    for name in list(manifest["cells"]):
        (tmp_path / "seed1" / name).rename(tmp_path / "seed1" / name.replace("seed=0", "seed=1"))
    manifest["cells"] = {
        n.replace("seed=0", "seed=1"): {**p, "train.seed": 1} for n, p in manifest["cells"].items()
    }
    (tmp_path / "seed1" / "sweep.json").write_text(json.dumps(manifest))
    archives = {
        p: p.read_bytes() for d in ("seed0", "seed1") for p in (tmp_path / d).rglob("*") if p.is_file()
    }
    (tmp_path / "pooled").mkdir()
    pooled = execute(
        "06_experiments",
        kernel,
        tmp_path / "pooled",
        OUT=str(tmp_path / "pooled" / "summary"),
        SWEEPS=[str(tmp_path / "seed0"), str(tmp_path / "seed1")],
        RUN_CELLS=False,
    )
    assert (pooled["cells"], pooled["finished"], pooled["failed"]) == (4, 4, 0)
    assert pooled["means"] == pytest.approx(results["means"])  # each seed is the same runs
    assert pooled["kind_means"] == results["kind_means"]  # the kinds read from the archives
    assert {p: p.read_bytes() for p in archives} == archives and all(
        p in archives for d in ("seed0", "seed1") for p in (tmp_path / d).rglob("*") if p.is_file()
    )
    for name in ("pooled_results.csv", "pooled_summary.csv", "pooled_curves.html", "results.json"):
        assert (tmp_path / "pooled" / "summary" / name).is_file()
    printed = "".join(
        "".join(o.get("text", ""))
        for c in json.loads((tmp_path / "pooled" / "06_experiments.ipynb").read_text())["cells"]
        for o in c.get("outputs", [])
    )
    assert "4 of 4 cells finished in " in printed
    assert "| variant=rspo \u2212 variant=plain | 0, 1 | " in printed  # paired by seed across the two folders


def _regime_archive(folder: Path) -> Path:
    """A committed archive of the regime map's shape, with made-up numbers: 2 levels × 2 ε × (plain,
    process, and RSPO and the control at sync_every 1 and 0) × 3 seeds. RSPO gains 10 points over the
    others on the hard level at ε 0.9 (+1 point per seed), 1 point per seed elsewhere; its actor's
    groups all fail in 80% of the hard level's iterations, 20% of the easy one's."""
    folder.mkdir()
    keys = ["env.name", "reward.misalign_eps", "variant", "swap.sync_every", "train.seed"]
    cells = {}
    for level, eps, variant, sync, seed in [
        (level, eps, variant, sync, seed)
        for level in ("chain-8x4", "chain-4x2")
        for eps in (0.0, 0.9)
        for variant, syncs in (("plain", [None]), ("process", [None]), ("rspo", [1, 0]), ("control", [1, 0]))
        for sync in syncs
        for seed in range(3)
    ]:
        params = {"env.name": level, "reward.misalign_eps": eps, "variant": variant}
        params |= ({} if sync is None else {"swap.sync_every": sync}) | {"train.seed": seed}
        name = cell_name(params)
        cells[name] = params
        hard = level == "chain-8x4"
        success = (0.1 if hard else 0.5) + (0.01 * seed if variant == "rspo" else 0.0)
        success += 0.1 if variant == "rspo" and hard and eps == 0.9 else 0.0
        (folder / name).mkdir()
        (folder / name / "results.json").write_text(json.dumps({"final_sampled_eval_success": success}))
        if sync is not None:  # the runs with an explorer log their swap
            row = {"rollout/success": success, "rollout/env_steps": 90.0, "swap/explorer_success": success}
            row |= {"swap/all_failure_groups_before": 0.8 if hard else 0.2, "swap/rescued_groups": 1.0}
            rows = [{"iteration": 0}] + [{"iteration": k} | row for k in (1, 2)]
            (folder / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "sweep.json").write_text(json.dumps({"keys": keys, "cells": cells, "parameters": {}}))
    return folder


def test_07_regime_map_draws_the_map_from_an_archive(kernel, tmp_path):
    archive = _regime_archive(tmp_path / "archive")
    files = {p: p.read_bytes() for p in archive.rglob("*") if p.is_file()}
    out = tmp_path / "out"
    results = execute("07_regime_map", kernel, tmp_path, SWEEPS=[str(archive)], OUT=str(out))
    assert (results["runs"], results["cells"], results["metric"]) == (72, 72, "final_sampled_eval_success")
    assert results["difficulty_order"] == ["chain-4x2", "chain-8x4"]  # 4 rooms of 2 doors before 8 of 4
    plain = results["rspo_minus_plain"]
    assert (plain["cells"], plain["seeds"], plain["above_zero"], plain["below_zero"]) == (8, 3, 2, 0)
    assert plain["means"]["chain-8x4, ε=0.9, sync_every=0"] == pytest.approx(0.11)
    assert plain["means"]["chain-4x2, ε=0.0, sync_every=1"] == pytest.approx(0.01)
    assert results["rspo_minus_process"]["above_zero"] == 2 and results["rspo_minus_control"]["cells"] == 8
    assert results["statistics"]["all_failure_share"]["chain-8x4, ε=0.0, sync_every=1"] == pytest.approx(0.8)
    assert results["statistics"]["rescued_groups"]["chain-4x2, ε=0.9, sync_every=0"] == pytest.approx(2.0)
    assert set(results["statistics"]) == {
        "all_failure_share",
        "rescued_groups",
        "explorer_minus_actor_success",
    }
    shown = json.loads((tmp_path / "07_regime_map.ipynb").read_text())["cells"]
    printed = "".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", ""))
        for c in shown
        for o in c.get("outputs", [])
    )
    assert "make sweep PROTOCOL=chain-4k" in printed  # the command that reruns it
    assert "+11.0 [+8.5, +13.5] *" in printed  # 0.10 / 0.11 / 0.12: t(2) * 0.01 / sqrt(3) = 0.025
    assert "RSPO − plain (percentage points): 8 cells, 3 seeds each." in printed
    assert "The interval lies above zero in 2 of 8 cells: chain-8x4, ε=0.9, sync_every=0" in printed
    for name in ("rspo_minus_plain", "rspo_minus_process", "rspo_minus_control", "swap_statistics"):
        assert (out / f"{name}.html").is_file()
    assert json.loads((out / "results.json").read_text()) == results
    assert {p: p.read_bytes() for p in archive.rglob("*") if p.is_file()} == files  # only read


def test_a_figure_s_static_copy_is_one_titled_page_of_that_figure(tmp_path):
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=["plain", "rspo"], y=[0.25, 0.75]))
    path = save_figure(fig, tmp_path / "new" / "folder", "rspo − <plain>")
    page = path.read_text(encoding="utf-8")  # the title's minus sign is written as UTF-8
    assert path == tmp_path / "new" / "folder" / "rspo − <plain>.html"
    assert page.startswith('<!DOCTYPE html><html><head><meta charset="utf-8">')
    assert "<title>rspo − &lt;plain&gt;</title>" in page and page.rstrip().endswith("</body></html>")
    assert page.count("Plotly.newPlot") == 1 and "cdn.plot.ly/plotly-" in page
    assert '"x":["plain","rspo"],"y":[0.25,0.75]' in page


# -------------------------------------------------------------------------------------------- hygiene
def widget_imports_guarded(source: str) -> bool:
    """Every import of rspo_widgets sits inside an ``if INTERACTIVE:`` block."""
    tree = ast.parse(source)
    guarded = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "INTERACTIVE" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    imports = [
        node
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rspo_widgets"))
        or (isinstance(node, ast.Import) and any(a.name.startswith("rspo_widgets") for a in node.names))
    ]
    return all(id(node) in guarded for node in imports)


def committed_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_every_notebook_is_tested():
    assert {p.stem for p in committed_notebooks()} == TESTED


@pytest.mark.parametrize("path", committed_notebooks(), ids=lambda p: p.stem)
def test_committed_notebooks_are_stripped_and_tidy(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert all("id" in cell for cell in json.loads(path.read_text())["cells"]), (
        "every cell has an id (nbformat 4.5)"
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, "outputs are stripped before commit"
    assert "widgets" not in nb.metadata and nb.metadata.kernelspec.name == "python3"
    # imports first, then the one parameters cell; it defaults to the interactive tiny CPU run
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and code[1] is tagged[0] and "import" in code[0].source
    assert "INTERACTIVE = True" in tagged[0].source
    assert 'PRESET = "tiny"' in tagged[0].source or "PRESET" not in tagged[0].source
    # papermill reads every parameter (a comment with "=" in it hides its line from -p and --help-notebook)
    assigned = [
        t.id for n in ast.parse(tagged[0].source).body if isinstance(n, ast.Assign) for t in n.targets
    ]
    assert set(assigned) == set(papermill.inspect_notebook(str(path)))
    # thin cells; no cell waits for a widget; the last cell records the results
    for cell in code[2:]:
        assert len(cell.source.strip().splitlines()) <= 15, cell.source
        assert "input(" not in cell.source and "wait_for" not in cell.source
    assert "record(" in code[-1].source
    for cell in code:
        assert max(map(len, cell.source.splitlines()), default=0) <= 110, cell.source  # the ruff line length
        assert widget_imports_guarded(cell.source), "headless runs never import rspo_widgets"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
