"""The paper's Table 1 beside ours (rspo_kit.experiments.paper_table): every cell of our rows
recomputed by hand from the episodes, the paper's rows as it prints them, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rspo_kit.experiments.intervals import mean_ci
from rspo_kit.experiments.paper_table import (
    ALFWORLD_KINDS,
    PAPER_1P5B,
    Study,
    main,
    paper_rows,
    study_rows,
    table_one,
)
from rspo_kit.records import write_episodes

PICK, LOOK = ALFWORLD_KINDS["Pick"], ALFWORLD_KINDS["Look"]
EVAL = "final_sampled/eval_unseen"


def _cells(out: Path, algo: str, runs: dict[tuple[str, int], list[tuple[str, str, bool, float]]]) -> Path:
    """An archive of ``variant`` × ``train.seed`` cells of ``algo``; each run's EVAL episodes
    (task, kind, won, score), and one greedy episode that EVAL must not count."""
    out.mkdir(parents=True)
    cells = {f"variant={v}__train.seed={s}": {"variant": v, "train.seed": s} for v, s in runs}
    (out / "sweep.json").write_text(json.dumps({"keys": ["variant", "train.seed"], "cells": cells}))
    for (v, s), episodes in runs.items():
        run = out / f"variant={v}__train.seed={s}"
        run.mkdir()
        (run / "results.json").write_text(json.dumps({"algo": algo, "final_success": 0.5}))
        rows = [
            {"task_id": t, "kind": k, "sample": 0, "won": w, "score": sc, "steps": 3}
            for t, k, w, sc in episodes
        ]
        write_episodes(run, EVAL, rows)
        write_episodes(run, "final/eval_unseen", [{**rows[0], "won": not rows[0]["won"]}])
    return out


def _alfworld(out: Path) -> Path:
    def ep(wins):  # tasks a, b of Pick and c of Look
        return [
            (t, k, bool(w), float(w))
            for (t, k), w in zip((("a", PICK), ("b", PICK), ("c", LOOK)), wins, strict=True)
        ]

    return _cells(
        out,
        "gigpo",
        {
            ("plain", 0): ep([0, 1, 0]),
            ("rspo", 0): ep([1, 1, 1]),
            ("plain", 1): ep([0, 0, 1]),
            ("rspo", 1): ep([1, 0, 1]),
        },
    )


def _ci(values: list[float], signed: bool = True, scale: float = 100.0) -> str:
    """A mean [95% t-interval] as the table writes it (one value alone has no interval)."""
    sign = "+" if signed else ""
    m, lo, hi = mean_ci(values)
    if len(values) == 1:
        return f"{scale * m:{sign}.1f}"
    return f"{scale * m:{sign}.1f} [{scale * lo:{sign}.1f}, {scale * hi:{sign}.1f}]"


def test_study_rows_are_the_seed_and_task_paired_differences_of_each_kind(tmp_path):
    rows = study_rows(Study("alfworld", "gigpo", _alfworld(tmp_path / "a")))
    # Pick (tasks a, b): plain 0.5, 0.0 by seed; RSPO 1.0, 0.5 -> +0.5, +0.5; per task a: +1, b: 0
    assert rows["plain"]["Pick"] == _ci([0.5, 0.0], signed=False)
    assert rows["rspo"]["Pick"] == _ci([1.0, 0.5], signed=False)
    assert rows["seed-paired"]["Pick"] == "+50.0 [+50.0, +50.0]"
    assert rows["task-paired"]["Pick"] == _ci([1.0, 0.0])
    # Look (task c): plain 0, 1; RSPO 1, 1 -> +1, 0 by seed; one task at +0.5, no interval
    assert rows["seed-paired"]["Look"] == _ci([1.0, 0.0])
    assert rows["task-paired"]["Look"] == "+50.0"
    # All: plain 1/3, 1/3; RSPO 1, 2/3 -> +2/3, +1/3 by seed; tasks a +1, b 0, c +0.5
    assert rows["seed-paired"]["All"] == _ci([2 / 3, 1 / 3])
    assert rows["task-paired"]["All"] == _ci([1.0, 0.0, 0.5])
    assert rows["plain"]["Heat"] == "—"  # no task of that kind was evaluated
    assert rows["seeds"] == {"plain": "2", "rspo": "2", "paired": "2"}


def test_study_rows_read_webshop_scores_in_points_and_plain_from_its_own_folder(tmp_path):
    def ep(scores):
        return [(f"t{i}", "shoe", sc == 100.0, sc) for i, sc in enumerate(scores)]

    both = _cells(
        tmp_path / "updates", "grpo", {("plain", 0): ep([0.0, 0.0]), ("rspo", 0): ep([100.0, 50.0])}
    )
    longer = _cells(tmp_path / "env_steps", "grpo", {("plain", 0): ep([50.0, 50.0])})
    rows = study_rows(Study("webshop", "grpo", both, longer))
    assert rows["plain"] == {"Score": "50.0", "SR": "0.0"}  # the second folder's plain, not the first's
    assert rows["rspo"] == {"Score": "75.0", "SR": "50.0"}
    assert rows["task-paired"]["Score"] == _ci([50.0, 0.0], scale=1.0)
    assert rows["seed-paired"] == {"Score": "+25.0", "SR": "+50.0"}  # one seed: no interval


def test_table_one_sets_our_rows_beside_the_papers_and_marks_what_did_not_run(tmp_path):
    text = table_one([Study("alfworld", "gigpo", _alfworld(tmp_path / "a"))])
    lines = text.splitlines()
    assert lines[0].startswith(f"Evaluation {EVAL}:")
    header = lines[2].strip("| ").split(" | ")
    assert header == [
        "algorithm",
        "row",
        "source",
        "Pick",
        "Look",
        "Clean",
        "Heat",
        "Cool",
        "Pick2",
        "All",
        "Score",
        "SR",
    ]
    rows = [line.strip("| ").split(" | ") for line in lines[4:25]]
    assert [r[0] for r in rows] == ["GRPO"] * 7 + ["GiGPO"] * 7 + ["PPO"] * 7
    gigpo_plain = rows[7]
    assert gigpo_plain[1:3] == ["GiGPO", "ours: mean [95% CI over seeds]"]
    assert gigpo_plain[-2:] == ["not run", "not run"]  # no WebShop study
    assert rows[0][3:] == ["not run"] * 9  # no GRPO study at all
    paper = rows[11]
    assert paper[2] == "paper, 1.5B: mean ± spread" and paper[3] == "98.2 ± 3.0" and paper[-1] == "67.4 ± 7.8"
    assert rows[13][2] == "paper, 1.5B" and rows[13][9] == "+1.6" and rows[13][11] == "+7.9"
    assert lines[-1].startswith("- alfworld GiGPO: RSPO ") and lines[-1].endswith("2 paired")


def test_the_papers_rows_are_its_table_1_at_1p5b():
    # the headline deltas of the paper's text: ALFWorld +5.7 / +1.6 / +8.6, WebShop +5.5 / +7.9 / +12.0
    assert [paper_rows(a)["difference"]["All"] for a in ("grpo", "gigpo", "ppo")] == ["+5.7", "+1.6", "+8.6"]
    assert [paper_rows(a)["difference"]["SR"] for a in ("grpo", "gigpo", "ppo")] == ["+5.5", "+7.9", "+12.0"]
    assert PAPER_1P5B[("ppo", "rspo")]["Score"] == (84.3, 2.1)


def test_errors_name_what_is_wrong(tmp_path, capsys):
    folder = _alfworld(tmp_path / "a")
    with pytest.raises(ValueError, match="ran \\['gigpo'\\], not 'ppo'"):
        study_rows(Study("alfworld", "ppo", folder))
    with pytest.raises(ValueError, match="no 'final/eval' episodes"):
        study_rows(Study("alfworld", "gigpo", folder), "final/eval")
    with pytest.raises(ValueError, match="Table 1 has"):
        Study("chain", "gigpo", folder)
    with pytest.raises(ValueError, match="two studies of alfworld gigpo"):
        table_one([Study("alfworld", "gigpo", folder)] * 2)
    (folder / "variant=rspo__train.seed=1" / "final_episodes.parquet").unlink()
    with pytest.raises(ValueError, match="recorded no final episodes"):
        study_rows(Study("alfworld", "gigpo", folder))
    assert main(["--study", "alfworld", "gigpo"]) == 2
    assert "--study takes ENV ALGO DIR [PLAIN_DIR]" in capsys.readouterr().err
    assert main(["--study", "webshop", "grpo", str(tmp_path / "none")]) == 2
    assert "not a sweep folder" in capsys.readouterr().err


def test_the_command_prints_the_table(tmp_path, capsys):
    folder = _alfworld(tmp_path / "a")
    assert main(["--study", "alfworld", "gigpo", str(folder), "--evaluation", EVAL]) == 0
    out = capsys.readouterr().out
    assert "| GiGPO | RSPO − GiGPO | ours: task-paired |" in out
