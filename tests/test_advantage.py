"""The advantage-share table on a hand-built turn table whose shares are computed by hand."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rspo_kit.experiments.advantage import advantage_share, advantage_share_table
from rspo_kit.records.tables import TURN_COLUMNS

# (iteration, role, group_id, traj_id, advantage, won), one row per step
STEPS = [
    (0, "actor", 0, 0, 1.0, True),  # won: +1.0, +0.5
    (0, "actor", 0, 0, 0.5, True),
    (0, "actor", 0, 1, 0.5, False),  # failed, mean -0.25
    (0, "actor", 0, 1, -1.0, False),
    (0, "actor", 0, 2, 0.25, False),  # failed, mean +0.25: partway, a positive advantage
    (0, "actor", 0, 2, 0.25, False),
    (0, "explorer", 0, 3, 9.0, False),  # not the actor's update: left out
    (1, "actor", 0, 0, -0.5, False),  # the same group and traj ids in the next iteration: another episode
]


def turns(steps=STEPS) -> pd.DataFrame:
    frame = pd.DataFrame(steps, columns=["iteration", "role", "group_id", "traj_id", "advantage", "won"])
    for column in TURN_COLUMNS:
        if column not in frame:
            frame[column] = None
    return frame[list(TURN_COLUMNS)]


def test_shares_of_a_hand_built_table():
    share = advantage_share(turns())
    # positive mass: won 1.0 + 0.5 = 1.5, failed 0.5 + 0.25 + 0.25 = 1.0 → 1.0 / 2.5
    assert share.failed_positive_share == pytest.approx(0.4)
    assert share.won_step_advantage == pytest.approx(0.75)
    assert share.failed_step_advantage == pytest.approx((0.5 - 1.0 + 0.25 + 0.25 - 0.5) / 5)
    # failed episodes: (0, 0, 1) mean -0.25, (0, 0, 2) +0.25, (1, 0, 0) -0.5 → one of three positive
    assert share.failed_episodes_positive == pytest.approx(1 / 3)
    assert share.steps == 7


def test_an_outcome_only_update_puts_nothing_on_failures():
    plain = [(0, "actor", 0, 0, 0.5, True), (0, "actor", 0, 1, -0.5, False), (0, "actor", 0, 1, -0.5, False)]
    share = advantage_share(turns(plain))
    assert share.failed_positive_share == 0.0
    assert share.failed_episodes_positive == 0.0


def test_a_table_without_advantages_has_no_share():
    table = turns()
    table["advantage"] = math.nan
    assert advantage_share(table) is None


def _cell(folder, name, table):
    cell = folder / name
    (cell / "turns").mkdir(parents=True)
    table.to_parquet(cell / "turns" / "iter_00000.parquet")
    (cell / "results.json").write_text(json.dumps({"final_eval_success": 0.5}))


def test_table_reads_the_finished_cells_of_a_sweep_folder_and_the_report_prints_it(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    out = tmp_path / "sweep"
    _cell(out, "ALGO=grpo__SWAP=process__SEED=0", turns())
    no_advantages = turns().assign(advantage=math.nan)
    _cell(out, "ALGO=ppo__SWAP=process__SEED=0", no_advantages)
    (out / "ALGO=grpo__SWAP=mix__SEED=0" / "turns").mkdir(parents=True)  # running: no results.json
    table = advantage_share_table([out])
    assert table["cell"].tolist() == ["ALGO=grpo__SWAP=process__SEED=0"]
    assert table["failed_positive_share"].tolist() == pytest.approx([0.4])

    cells = {
        name: {"ALGO": name.split("__")[0][5:], "SWAP": "process", "SEED": 0}
        for name in ["ALGO=grpo__SWAP=process__SEED=0", "ALGO=ppo__SWAP=process__SEED=0"]
    }
    (out / "sweep.json").write_text(json.dumps({"keys": ["ALGO", "SWAP", "SEED"], "cells": cells}))
    assert report_main([str(out), "--advantage-share"]) == 0
    printed = capsys.readouterr().out
    assert "| ALGO=grpo__SWAP=process__SEED=0 | 0.400 | 0.750 | -0.100 | 0.333 | 7 |" in printed
    assert "ppo" not in printed.split("Where the positive advantage goes")[1]


def test_report_names_a_folder_without_turn_tables(tmp_path, capsys):
    out = tmp_path / "archive"
    out.mkdir()
    with pytest.raises(FileNotFoundError, match="archives keep no turn tables"):
        from rspo_kit.experiments.advantage import advantage_share_report

        advantage_share_report([out])
