"""The regime map's analysis on a hand-built sweep whose differences and intervals are worked out here.

The fixture: two difficulty levels listed hardest first (``chain-10x2`` before ``chain-4x2``, which is
also the alphabetical order), ε 0.0 and 0.9, RSPO and the control at ``swap.sync_every`` 1 and 0, the
baselines without an explorer setting, seeds 0-2, with a run missing and a metric not recorded.
Intervals are Student-t over the seeds: t(2) = 4.303 for three seeds, t(1) = 12.706 for two.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pandas as pd
import pytest

from rspo_kit.experiments.grid import cell_name
from rspo_kit.studies.regime_map import (
    MapKeys,
    describe_map,
    difficulty_order,
    load_runs,
    map_figure,
    map_record,
    map_table,
    regime_differences,
    run_swap_statistics,
    swap_statistics,
)

pytestmark = pytest.mark.timeout(120)

METRIC = "final_eval_success"
# (variant, level, ε, sync_every, per-seed values of METRIC); None: recorded as null; a seed past the
# list's end: that run never finished
RUNS = [
    ("plain", "chain-10x2", 0.9, None, [None, 0.10, 0.05]),
    ("rspo", "chain-10x2", 0.9, 1, [0.20, 0.30]),
    ("rspo", "chain-10x2", 0.9, 0, [0.30, 0.40, 0.20]),
    ("plain", "chain-4x2", 0.0, None, [0.50, 0.40, 0.60]),
    ("rspo", "chain-4x2", 0.0, 1, [0.55, 0.50, 0.60]),
    ("rspo", "chain-4x2", 0.0, 0, [0.62, 0.50, 0.72]),
    ("control", "chain-4x2", 0.0, 1, [0.45, 0.42, 0.50]),
    ("control", "chain-4x2", 0.0, 0, [0.60, 0.50, 0.70]),
]


def _params(variant: str, level: str, eps: float, sync: int | None, seed: int) -> dict:
    params = {"env.name": level, "reward.misalign_eps": eps, "variant": variant}
    return params | ({} if sync is None else {"swap.sync_every": sync}) | {"train.seed": seed}


def runs_table() -> pd.DataFrame:
    """The fixture as ``load_runs`` gives it: one row per finished run; baselines have no sync_every."""
    rows = [
        _params(variant, level, eps, sync, seed) | {METRIC: value}
        for variant, level, eps, sync, values in RUNS
        for seed, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def _row(table: pd.DataFrame, level: str, eps: float, sync: int) -> pd.Series:
    found = table[(table["env.name"] == level) & (table["reward.misalign_eps"] == eps)]
    found = found[found["swap.sync_every"] == sync]
    assert len(found) == 1, found
    return found.iloc[0]


# ------------------------------------------------------------------------------------ differences
def test_rspo_minus_plain_pairs_seed_by_seed_and_drops_what_one_side_lacks():
    table = regime_differences(runs_table(), METRIC, "rspo", "plain")
    # easiest level first (4 rooms of 2 doors before 10 of 2), though the runs list it second and the
    # alphabet puts it second; ε ascending; the persistent explorer (0) before the re-synced (1)
    cells = list(zip(table["env.name"], table["reward.misalign_eps"], table["swap.sync_every"], strict=True))
    assert cells == [
        ("chain-4x2", 0.0, 0),
        ("chain-4x2", 0.0, 1),
        ("chain-10x2", 0.9, 0),
        ("chain-10x2", 0.9, 1),
    ]
    assert set(table["a"]) == {"rspo"} and set(table["b"]) == {"plain"} and set(table["metric"]) == {METRIC}

    # re-synced: +0.05 / +0.10 / 0.00, mean 0.05, sd 0.05, half-width 4.303 * 0.05 / √3 = 0.1242
    row = _row(table, "chain-4x2", 0.0, 1)
    assert row["seeds"] == [0, 1, 2] and row["n"] == 3
    assert row["differences"] == pytest.approx([0.05, 0.10, 0.0])
    assert (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx((0.05, -0.07422, 0.17422), abs=1e-5)
    assert not row["clears_zero"]
    # persistent: +0.12 / +0.10 / +0.12, mean 0.1133, sd 0.01155, half-width 0.02869: clear of zero
    row = _row(table, "chain-4x2", 0.0, 0)
    assert (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (0.11333, 0.08465, 0.14202), abs=1e-5
    )
    assert row["clears_zero"]

    # plain's seed 0 recorded no value: left out of the pair, not read as 0 (that would give +0.30)
    row = _row(table, "chain-10x2", 0.9, 0)
    assert row["seeds"] == [1, 2] and row["differences"] == pytest.approx([0.30, 0.15])
    # two seeds: t(1) = 12.706, sd 0.1061, half-width 0.9530
    assert (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx((0.225, -0.72795, 1.17795), abs=1e-5)
    # RSPO's seed 2 never finished and plain's seed 0 has no value: seed 1 alone, no interval
    row = _row(table, "chain-10x2", 0.9, 1)
    assert row["seeds"] == [1] and row["n"] == 1 and row["mean"] == pytest.approx(0.20)
    assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"]) and not row["clears_zero"]


def test_rspo_minus_control_pairs_within_an_explorer_setting():
    table = regime_differences(runs_table(), METRIC, "rspo", "control")
    assert len(table) == 2  # the control ran on chain-4x2 only: the other cells have no pair
    # re-synced − re-synced: +0.10 / +0.08 / +0.10; persistent − persistent: +0.02 / 0.00 / +0.02
    assert _row(table, "chain-4x2", 0.0, 1)["differences"] == pytest.approx([0.10, 0.08, 0.10])
    assert _row(table, "chain-4x2", 0.0, 0)["differences"] == pytest.approx([0.02, 0.0, 0.02])
    assert _row(table, "chain-4x2", 0.0, 0)["mean"] == pytest.approx(0.04 / 3)


def test_a_baseline_run_at_every_explorer_setting_pairs_with_its_own_setting():
    # a single grid over variant × sync_every runs plain at both settings (the same config twice)
    runs = runs_table()
    plain = runs[runs["variant"] == "plain"]
    at = [plain.assign(**{"swap.sync_every": s, METRIC: plain[METRIC] + 0.01 * s}) for s in (0, 1)]
    runs = pd.concat([runs[runs["variant"] != "plain"], *at], ignore_index=True)
    table = regime_differences(runs, METRIC, "rspo", "plain")
    assert _row(table, "chain-4x2", 0.0, 1)["differences"] == pytest.approx([0.04, 0.09, -0.01])
    assert _row(table, "chain-4x2", 0.0, 0)["differences"] == pytest.approx([0.12, 0.10, 0.12])


def test_plain_and_the_control_run_at_one_eps_pair_with_every_eps_and_process_only_with_its_own():
    # plain and the control never read the process reward: a sweep runs them at ε = 0 only
    runs = runs_table()
    rspo = runs[(runs["variant"] == "rspo") & (runs["env.name"] == "chain-4x2")]
    process = runs[runs["variant"] == "plain"].assign(variant="process")
    at_half = rspo.assign(**{"reward.misalign_eps": 0.5, METRIC: rspo[METRIC] - 0.2})
    runs = pd.concat([runs, at_half, process], ignore_index=True)
    plain = regime_differences(runs, METRIC, "rspo", "plain")
    # ε = 0.5 pairs with plain's runs at ε = 0: the ε = 0 differences less 0.2
    assert _row(plain, "chain-4x2", 0.5, 1)["differences"] == pytest.approx([-0.15, -0.10, -0.20])
    assert _row(plain, "chain-4x2", 0.0, 1)["differences"] == pytest.approx([0.05, 0.10, 0.0])
    control = regime_differences(runs, METRIC, "rspo", "control")
    assert _row(control, "chain-4x2", 0.5, 0)["differences"] == pytest.approx([-0.18, -0.20, -0.18])
    # process only trains on the process reward: its runs at ε = 0 say nothing about ε = 0.5
    dense = regime_differences(runs, METRIC, "rspo", "process")
    assert not (dense["reward.misalign_eps"] == 0.5).any()
    assert len(regime_differences(runs, METRIC, "rspo", "process", eps_free_variants=())) == len(dense)
    everywhere = regime_differences(runs, METRIC, "rspo", "process", eps_free_variants=("process",))
    assert _row(everywhere, "chain-4x2", 0.5, 1)["n"] == 3


def test_runs_that_share_a_seed_in_one_cell_are_an_error():
    runs = runs_table()
    twice = pd.concat([runs, runs[runs["variant"] == "plain"]], ignore_index=True)
    with pytest.raises(ValueError, match="several runs share a seed"):
        regime_differences(twice, METRIC, "rspo", "plain")
    with pytest.raises(ValueError, match="no recorded metric 'final_eval_score'"):
        regime_differences(runs, "final_eval_score")


def test_a_sweep_without_explorer_or_eps_keys_is_a_map_of_one_panel():
    runs = runs_table()
    runs = runs[runs["swap.sync_every"].isin([1]) | runs["variant"].eq("plain")]
    runs = runs.drop(columns=["swap.sync_every", "reward.misalign_eps"])
    table = regime_differences(runs, METRIC, "rspo", "plain")
    assert list(table["env.name"]) == ["chain-4x2", "chain-10x2"]
    assert table["swap.sync_every"].isna().all() and table["reward.misalign_eps"].isna().all()
    assert table["differences"].iloc[0] == pytest.approx([0.05, 0.10, 0.0])


def test_difficulty_order_is_by_the_levels_size_else_the_baselines_start_success():
    assert difficulty_order(runs_table()) == ["chain-4x2", "chain-10x2"]
    runs = pd.DataFrame(
        {
            "env.name": ["hard", "easy", "middle", "easy", "hard"],
            "variant": ["plain", "plain", "plain", "plain", "rspo"],
            "start_success": [0.02, 0.6, 0.3, 0.4, 0.9],  # rspo's start is not the baseline's
            "train.seed": [0, 0, 0, 1, 0],
        }
    )
    assert difficulty_order(runs) == ["easy", "middle", "hard"]
    assert difficulty_order(runs.drop(columns="start_success")) == ["hard", "easy", "middle"]


def test_the_keys_can_be_other_grid_keys():
    runs = runs_table().rename(columns={"swap.sync_every": "swap.explorer_temperature"})
    keys = MapKeys(explorer="swap.explorer_temperature")
    table = regime_differences(runs, METRIC, keys=keys)
    assert list(table["swap.explorer_temperature"]) == [0, 1, 0, 1]
    assert "swap.explorer_temperature=0" in map_table(table, keys).columns.get_level_values(0)[0]


# --------------------------------------------------------------------------------------- the display
def test_map_table_figure_sentences_and_record_show_the_same_numbers():
    table = regime_differences(runs_table(), METRIC, "rspo", "plain")
    text = map_table(table)
    assert list(text.index) == ["chain-4x2", "chain-10x2"]
    persistent = "persistent (swap.sync_every=0)"
    assert text.loc["chain-4x2", (persistent, "ε=0.0")] == "+11.3 [+8.5, +14.2] *"  # percentage points
    assert (
        text.loc["chain-4x2", ("re-synced every iteration (swap.sync_every=1)", "ε=0.0")]
        == "+5.0 [-7.4, +17.4]"
    )
    assert text.loc["chain-10x2", ("re-synced every iteration (swap.sync_every=1)", "ε=0.9")] == "+20.0"
    assert text.loc["chain-4x2", (persistent, "ε=0.9")] == "—"  # no run there

    spec = map_figure(table, title="RSPO − plain")
    assert len(spec["data"]) == 2 and [t["xaxis"] for t in spec["data"]] == ["x", "x2"]
    persistent_panel = spec["data"][0]
    assert persistent_panel["y"] == ["chain-4x2", "chain-10x2"] and persistent_panel["x"] == [
        "ε=0.0",
        "ε=0.9",
    ]
    assert (
        persistent_panel["z"][0][0] == pytest.approx(11.333, abs=1e-3) and persistent_panel["z"][0][1] is None
    )
    assert persistent_panel["text"][0][0].endswith(" *")
    assert spec["layout"]["coloraxis"]["cmid"] == 0.0  # differences: a scale centred on zero
    assert spec["layout"]["yaxis"]["autorange"] == "reversed"  # the easiest level on top
    assert [a["text"] for a in spec["layout"]["annotations"]] == [
        persistent,
        "re-synced every iteration (swap.sync_every=1)",
    ]
    json.dumps(spec)  # plain data

    sentence = describe_map(table, label="RSPO − plain")
    assert sentence.startswith("RSPO − plain (percentage points): 4 cells, 1-3 seeds each.")
    assert "above zero in 1 of 4 cells: chain-4x2, ε=0.0, sync_every=0: +11.3 [+8.5, +14.2] *." in sentence
    assert "below zero in 0 of 4 cells." in sentence
    assert "from +5.0 (chain-4x2, ε=0.0, sync_every=1) to +22.5 (chain-10x2, ε=0.9, sync_every=0)" in sentence

    record = map_record(table)
    assert (record["cells"], record["seeds"], record["above_zero"], record["below_zero"]) == (4, 1, 1, 0)
    assert record["means"]["chain-4x2, ε=0.0, sync_every=0"] == pytest.approx(0.11333, abs=1e-5)
    assert record["intervals"]["chain-4x2, ε=0.0, sync_every=0"] == pytest.approx(
        [0.08465, 0.14202], abs=1e-5
    )


# ----------------------------------------------------------------------------- archives and the swap
def _write_archive(folder: Path, per_iteration: dict[tuple, list[dict]]) -> Path:
    """The fixture as a committed archive: sweep.json, and per finished run results.json and, for runs
    with an explorer, metrics.jsonl (``per_iteration``: its rows after row 0, by (variant, sync, seed))."""
    folder.mkdir()
    keys = ["env.name", "reward.misalign_eps", "variant", "swap.sync_every", "train.seed"]
    cells = {}
    for variant, level, eps, sync, values in RUNS:
        for seed in range(3):  # every run was planned; the missing one never finished
            params = _params(variant, level, eps, sync, seed)
            cells[cell_name(params)] = params
            if seed >= len(values):
                continue
            run = folder / cell_name(params)
            run.mkdir()
            (run / "results.json").write_text(json.dumps({METRIC: values[seed], "start_success": 0.1}))
            rows = per_iteration.get((variant, level, sync, seed))
            if rows is not None:
                lines = [{"iteration": 0}] + [{"iteration": k + 1} | r for k, r in enumerate(rows)]
                (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (folder / "sweep.json").write_text(json.dumps({"keys": keys, "cells": cells, "parameters": {}}))
    return folder


def _iterations(all_failure: list[float], rescued: list[float], actor: float, explorer: float) -> list[dict]:
    return [
        {
            "rollout/success": actor,
            "rollout/env_steps": 90.0,
            "swap/all_failure_groups_before": share,
            "swap/zero_var_groups_before": share,
            "swap/rescued_groups": groups,
            "swap/explorer_success": explorer,
            "swap/process_outcome_tau": None,  # every group all-failed: no ranking, τ undefined
        }
        for share, groups in zip(all_failure, rescued, strict=True)
    ]


def test_archived_runs_load_and_give_the_swap_statistics_per_cell(tmp_path):
    logs = {
        ("rspo", "chain-4x2", 1, 0): _iterations([0.5, 0.25], [1, 2], actor=0.25, explorer=0.5),
        ("rspo", "chain-4x2", 1, 1): _iterations([0.5, 0.5], [0, 1], actor=0.25, explorer=0.25),
        ("rspo", "chain-4x2", 1, 2): _iterations([0.25, 0.25], [2, 3], actor=0.5, explorer=0.5),
        ("control", "chain-4x2", 0, 0): _iterations([0.75, 0.75], [0, 0], actor=0.25, explorer=0.25),
    }
    archive = _write_archive(tmp_path / "archive", logs)
    runs = load_runs(archive)
    assert (runs.attrs["cells"], runs.attrs["finished"], len(runs)) == (24, 23, 23)
    assert runs["run_dir"].map(lambda d: Path(d).parent == archive).all()
    # the baselines ran without the key: None, not NaN, and ints stay ints
    assert runs.loc[runs["variant"] == "plain", "swap.sync_every"].map(lambda v: v is None).all()
    assert set(runs.loc[runs["variant"] == "rspo", "swap.sync_every"]) == {0, 1}
    # the same differences as from the table built in memory
    pd.testing.assert_frame_equal(
        regime_differences(runs, METRIC).drop(columns="differences"),
        regime_differences(runs_table(), METRIC).drop(columns="differences"),
    )

    stats = swap_statistics(runs)
    assert set(stats["variant"]) == {"rspo", "control"}
    rspo = stats[
        (stats["variant"] == "rspo") & (stats["swap.sync_every"] == 1) & (stats["env.name"] == "chain-4x2")
    ]
    by = rspo.set_index("statistic")
    # per run: all-failure share 0.375 / 0.5 / 0.25 -> mean 0.375, sd 0.125, half-width 0.3105
    assert by.loc["all_failure_share", "values"] == pytest.approx([0.375, 0.5, 0.25])
    lo_mid_hi = by.loc["all_failure_share", ["ci_low", "mean", "ci_high"]].tolist()
    assert lo_mid_hi == pytest.approx([0.06446, 0.375, 0.68554], abs=1e-5)
    # rescued groups summed per run: 3 / 1 / 5 -> mean 3, sd 2, half-width 4.969
    assert by.loc["rescued_groups", "values"] == [3.0, 1.0, 5.0]
    assert by.loc["rescued_groups", ["ci_low", "ci_high"]].tolist() == pytest.approx(
        [-1.96868, 7.96868], abs=1e-5
    )
    assert by.loc["rescued_per_iteration", "mean"] == pytest.approx(1.5)
    assert by.loc["explorer_minus_actor_success", "values"] == pytest.approx([0.25, 0.0, 0.0])
    assert by.loc["tau", "n"] == 0 and math.isnan(by.loc["tau", "mean"])  # never recorded
    # RSPO's other cells kept no training log here: counted as missing, not as zeros
    other = stats[(stats["variant"] == "rspo") & (stats["env.name"] == "chain-10x2")]
    assert len(other) and (other["n"] == 0).all()
    control = stats[(stats["variant"] == "control") & (stats["statistic"] == "all_failure_share")]
    assert control.set_index("swap.sync_every")["n"].to_dict() == {0: 1, 1: 0}

    one = rspo[rspo["statistic"] == "all_failure_share"]
    assert map_table(one).loc["chain-4x2"].tolist() == ["37.5 [6.4, 68.6]"]  # a share, in percent, unsigned
    spec = map_figure(stats[stats["variant"] == "rspo"], facet="statistic")
    assert len(spec["data"]) == 2 * 9  # a row of panels per statistic, one per explorer setting
    assert "cmid" not in spec["layout"]["coloraxis"]  # shares: a one-sided scale
    assert describe_map(one) == "all_failure_share (%): 1 cell, 3 seeds each. Every cell's mean is 37.5."


def test_a_missing_archive_says_which_commands_make_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="make sweep PROTOCOL="):
        load_runs([tmp_path / "nothing_here"])


def test_run_swap_statistics_of_a_run_without_an_explorer_are_missing():
    m = pd.DataFrame({"iteration": [0, 1, 2], "rollout/success": [None, 0.25, 0.75]})
    stats = run_swap_statistics(m)
    assert stats["actor_success"] == 0.5
    assert all(math.isnan(v) for k, v in stats.items() if k != "actor_success")


def test_the_swap_logs_the_share_of_groups_where_every_actor_episode_failed():
    from types import SimpleNamespace

    from rspo_kit.swap import swap_metrics

    def traj(task: str, won: bool) -> SimpleNamespace:
        return SimpleNamespace(task_id=task, won=won, score=float(won))

    # groups a and b all failed, c all won (no variance either), d mixed
    actor = [
        traj(t, w)
        for t, w in [("a", 0), ("a", 0), ("b", 0), ("b", 0), ("c", 1), ("c", 1), ("d", 1), ("d", 0)]
    ]
    random.Random(0).shuffle(actor)
    outcome = lambda t: float(t.won)  # noqa: E731
    m = swap_metrics(actor, [], actor, [False] * len(actor), outcome, outcome, 0, 0)
    assert m["swap/all_failure_groups_before"] == 0.5 and m["swap/zero_var_groups_before"] == 0.75


def test_the_study_and_the_docs_give_the_commands_notebook_07_runs():
    from rspo_kit.studies.regime_map import RERUN_COMMANDS

    root = Path(__file__).resolve().parents[1]
    for page in ("results/regime_map/README.md", "docs/experiments.md"):
        text = (root / page).read_text()
        assert all(command in text.splitlines() for command in RERUN_COMMANDS), page
