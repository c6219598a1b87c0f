"""The paper's Figure 3 read off runs (rspo_kit.experiments.dense_hacking): the curve per update, its
blocks, the figure and the command's files."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rspo_kit.experiments.dense_hacking import curve_blocks, hacking_curve, hacking_figure, main, mean_curve
from rspo_kit.records import MetricsLog
from rspo_kit.records.metrics import METRICS_FILE


def _runs(tmp_path):
    """Two runs of three updates: success falls while the dense return rises; s0 evaluated at update 2."""
    for seed, dense in ((0, [0.2, 0.5, 0.9]), (1, [0.1, 0.4, 0.8])):
        (tmp_path / f"s{seed}").mkdir()
        log = MetricsLog(tmp_path / f"s{seed}" / METRICS_FILE)
        log.log({"iteration": 0, "eval/success": 0.1})  # the starting point: no rollout yet
        for i, d in enumerate(dense, start=1):
            row = {"iteration": i, "rollout/success": 0.5 - 0.1 * i - 0.1 * seed, "rollout/process_return": d,
                   "rollout/cumulative_env_steps": 100.0 * i}  # fmt: skip
            log.log(row | ({"eval/success": 0.6} if (seed, i) == (0, 2) else {}))
    return [tmp_path / "s0", tmp_path / "s1"]


def test_hacking_curve_reads_success_dense_return_and_valid_success_per_update(tmp_path):
    curve = hacking_curve(_runs(tmp_path))
    assert curve["update"].tolist() == [1, 2, 3, 1, 2, 3] and curve["run"].tolist()[:3] == ["s0"] * 3
    assert curve.dense_return.tolist() == [0.2, 0.5, 0.9, 0.1, 0.4, 0.8]
    assert curve.success.tolist()[:3] == pytest.approx([0.4, 0.3, 0.2])
    assert curve.valid_success.isna().tolist() == [True, False, True, True, True, True]
    mean = mean_curve(curve)
    assert mean["success"].tolist() == pytest.approx([0.35, 0.25, 0.15])
    assert mean["valid_success"].tolist()[1] == 0.6 and mean["runs"].tolist() == [2, 2, 2]


def test_blocks_average_the_updates_they_hold():
    curve = pd.DataFrame({"update": range(1, 6), "success": [0.1, 0.3, 0.5, 0.7, 0.9],
                          "dense_return": [1.0] * 5, "valid_success": [math.nan] * 5, "env_steps": range(10, 60, 10)})  # fmt: skip
    blocks = curve_blocks(curve, 2)
    assert blocks["updates"].tolist() == ["1-2", "3-4", "5"]
    assert blocks["success"].tolist() == pytest.approx([0.2, 0.6, 0.9]) and blocks["env_steps"].tolist() == [
        20,
        40,
        50,
    ]
    with pytest.raises(ValueError, match="at least one update"):
        curve_blocks(curve, 0)


def test_the_figure_has_both_axes_every_run_and_the_means(tmp_path):
    spec = hacking_figure(hacking_curve(_runs(tmp_path)))
    assert spec["layout"]["yaxis2"]["overlaying"] == "y"
    thin = [t for t in spec["data"] if t.get("showlegend") is False]
    assert len(thin) == 4 and {t["yaxis"] for t in thin} == {"y", "y2"}
    names = [t["name"] for t in spec["data"] if t.get("showlegend") is not False]
    assert names == ["rollout success (mean of 2)", "mean dense return Σ r_t", "valid success"]
    json.dumps(spec)  # plain data


def test_the_command_writes_its_files_and_prints_the_blocks(tmp_path, capsys):
    runs = _runs(tmp_path)
    assert main([*map(str, runs), "--out", str(tmp_path / "out"), "--block", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| updates | rollout success | valid success |")
    assert out[2] == "| 1-2 | 30.0 | 60.0 | 0.300 | 200 |" and out[3] == "| 3 | 15.0 | — | 0.850 | 300 |"
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"runs.csv", "curve.csv", "curve.html"}
    (tmp_path / "empty").mkdir()
    MetricsLog(tmp_path / "empty" / METRICS_FILE).log({"iteration": 0, "eval/success": 0.1})
    assert main([str(tmp_path / "empty"), "--out", str(tmp_path / "o2")]) == 2
    assert "no rollout/success rows" in capsys.readouterr().err
