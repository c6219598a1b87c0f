"""Sweep curves against either budget: env steps (a user's cost) and updates of A (the paper's)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_sweep import _fake_sweep

from rspo_kit.experiments.aggregation import aggregate
from rspo_kit.experiments.figures import curve_figure


def _cell(updates_per_point: int, steps_per_update: int, rise: float) -> dict:
    updates = [0, updates_per_point, 2 * updates_per_point]
    return {
        "final_eval_success": 0.5 + rise,
        "curve_actor_updates": updates,
        "curve_env_steps": [u * steps_per_update for u in updates],
        "curve_success": [0.2, 0.2 + rise, 0.5 + rise],
    }


def test_curves_are_drawn_against_updates_of_a_or_env_steps(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    # RSPO: 6 updates of A in two points, each update 230 env steps; plain: the same updates at 100
    cells = {"SEED=0__SWAP=true": _cell(3, 230, 0.2), "SEED=0__SWAP=false": _cell(3, 100, 0.0)}
    _fake_sweep(tmp_path / "sweep", {"SEED": [0], "SWAP": [True, False]}, cells)
    aggregate(tmp_path / "sweep")
    for page in ("curves.html", "curves_updates.html"):
        assert (tmp_path / "sweep" / page).is_file()
    rows = [dict(v, cell=k, SWAP=k.endswith("true")) for k, v in cells.items()]
    by_updates = curve_figure(rows, ["SWAP"], x="curve_actor_updates")
    by_steps = curve_figure(rows, ["SWAP"])
    assert by_updates["layout"]["xaxis"]["title"]["text"] == "updates of the actor A"
    mean = {t["name"]: t for t in by_updates["data"] if t["line"]["width"] == 3}
    assert {max(t["x"]) for t in mean.values()} == {6.0}  # both runs end at 6 updates of A
    steps = {t["name"]: max(t["x"]) for t in by_steps["data"] if t["line"]["width"] == 3}
    assert sorted(steps.values()) == [600.0, 1380.0]  # RSPO paid 2.3x the env steps
    page = tmp_path / "updates.html"
    args = [str(tmp_path / "sweep"), "--curves", str(page), "--curve-x", "curve_actor_updates"]
    assert report_main(args) == 0
    html = page.read_text()
    assert "curve_success vs updates of A" in html
    spec, _ = json.JSONDecoder().raw_decode(html.split("Plotly.newPlot('fig', ")[1])
    rspo = next(t for t in spec if t["line"]["width"] == 3 and "rspo" in t["name"])
    assert float(np.interp(3, rspo["x"], rspo["y"])) == pytest.approx(0.4, abs=0.02)
    with pytest.raises(ValueError, match="x must be one of"):
        curve_figure(rows, ["SWAP"], x="curve_success")


def test_run_statistics_count_a_paper_loop_run_by_its_budget_columns():
    """A loop row is k updates of A: run_statistics reads updates and the explorer's env-step share from
    budget/*, and B's edge over A from its collection's success (a loop has no swap/explorer_success)."""
    import math

    import pandas as pd

    from rspo_kit.experiments.training_statistics import run_statistics

    m = pd.DataFrame(
        {
            "iteration": [0, 1, 2],
            "rollout/cumulative_env_steps": [0, 400, 800],
            "rollout/env_steps": [None, 100, 100],
            "rollout/success": [None, 0.25, 0.5],
            "budget/env_steps": [0, 400, 800],
            "budget/env_steps_actor": [0, 150, 300],  # A's k rollouts; rollout/env_steps is one
            "budget/actor_updates": [0, 3, 6],
            "explorer/dense_before": [None, 0.2, 0.4],
            "explorer/dense_after": [None, 0.6, 0.8],
            "swap/collect_success": [None, 0.5, 0.5],
        }
    )
    s = run_statistics(m, window=1)
    assert (s["actor_updates"], s["explorer_steps_share"]) == (
        6.0,
        0.625,
    )  # 6 updates, not 2 rows; 1 − 300/800
    assert (s["dense_before"], s["dense_after"]) == pytest.approx((0.3, 0.7))
    assert s["explorer_success"] == 0.5 and s["explorer_minus_actor_success"] == pytest.approx(0.125)
    assert math.isnan(s["rescued_groups"])
