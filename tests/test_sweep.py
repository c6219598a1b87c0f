"""The notebook record shim and the papermill sweep, on a notebook written here (seconds per cell)."""

from __future__ import annotations

import doctest
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from processes import alive, descendants

import rspo_kit.experiments.aggregation as aggregation_module
import rspo_kit.experiments.cells as cells_module
import rspo_kit.experiments.grid as grid_module
import rspo_kit.experiments.intervals as intervals_module
import rspo_kit.experiments.sweep as sweep_module
import rspo_kit.records.notebook as notebook_module
from rspo_kit.experiments import (
    aggregate,
    cell_name,
    expand_grid,
    mean_ci,
    plan,
    run_sweep,
    summarize,
    sweep_status,
    write_figure_html,
)
from rspo_kit.records import NoResults, read_results, record

pytestmark = pytest.mark.timeout(300)

PARAMETERS = """\
ALGO = "grpo"
SWAP = False
SEED = 0
RUN_DIR = ""
THREADS = None
LOG = ""        # every execution appends its cell to this file
FAIL_IF = ""    # the notebook fails while this file exists
SLEEP = 0       # seconds the notebook waits before it records
"""

BODY = """\
import os
import time
from pathlib import Path
from rspo_kit.records import record
name = f"{ALGO}/{SWAP}/{SEED}"
with open(LOG, "a") as f:
    f.write(name + "\\n")
if FAIL_IF and Path(FAIL_IF).exists():
    raise RuntimeError("asked to fail")
if RUN_DIR:  # what the trainer's log looks like halfway
    Path(RUN_DIR).mkdir(parents=True, exist_ok=True)
    Path(RUN_DIR, "metrics.jsonl").write_text('{"iteration": 3, "rollout/cumulative_env_steps": 1234.0}\\n')
time.sleep(SLEEP)
success = {"grpo": 0.2, "gigpo": 0.4}[ALGO] + 0.1 * SWAP + 0.01 * SEED
record({"final_success": success, "threads": THREADS, "omp": os.environ.get("OMP_NUM_THREADS"),
        "bars_off": os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS"),
        "curve_env_steps": [0, 50, 100], "curve_success": [0.0, success / 2, success]},
       RUN_DIR or None)
"""


def _write_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(PARAMETERS)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(BODY)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture()
def tiny_notebook(tmp_path: Path) -> Path:
    return _write_notebook(tmp_path / "tiny.ipynb")


def _log_lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


# ------------------------------------------------------------------------------------ the record shim
def test_library_docstring_examples():
    for module in (notebook_module, grid_module, intervals_module):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0


def test_record_prints_one_tagged_line_and_writes_results_json(tmp_path, capsys):
    import numpy as np

    out = record({"success": np.float32(0.5), "n": np.int64(3), "bad": math.inf, "path": tmp_path}, tmp_path)
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and line.startswith("RSPO_RESULTS {")
    assert out == {"bad": None, "n": 3, "path": str(tmp_path), "success": 0.5}
    assert json.loads((tmp_path / "results.json").read_text()) == out
    assert not list(tmp_path.glob(".*tmp"))  # the temp file was renamed
    with pytest.raises(TypeError, match="JSON-like"):
        record({"x": object()})


def test_read_results_takes_the_last_tagged_line(tmp_path):
    nb = nbformat.v4.new_notebook()
    first = nbformat.v4.new_code_cell("")
    first.outputs = [nbformat.v4.new_output("stream", name="stdout", text='RSPO_RESULTS {"a": 1}\n')]
    last = nbformat.v4.new_code_cell("")
    # Jupyter may split one print over several stream outputs
    last.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="noise\nRSPO_RES"),
        nbformat.v4.new_output("stream", name="stdout", text='ULTS {"a": 2}\n'),
        nbformat.v4.new_output("stream", name="stderr", text='RSPO_RESULTS {"a": 3}\n'),  # not stdout
    ]
    nb.cells = [first, last]
    nbformat.write(nb, tmp_path / "done.ipynb")
    assert read_results(tmp_path / "done.ipynb") == {"a": 2}
    nb.cells = [nbformat.v4.new_code_cell("print(1)")]
    nbformat.write(nb, tmp_path / "empty.ipynb")
    (tmp_path / "truncated.ipynb").write_text('{"cells": [')
    for name in ("empty", "truncated", "missing"):
        with pytest.raises(NoResults):
            read_results(tmp_path / f"{name}.ipynb")


# ----------------------------------------------------------------------------------------- the grid
def test_grid_expansion_and_names(tmp_path):
    cells = expand_grid({"ALGO": ["grpo", "gigpo"], "SWAP": [True, False, "control"], "SEED": [0, 1]})
    assert len(cells) == 12 and cells[0] == {"ALGO": "grpo", "SWAP": True, "SEED": 0}
    assert cells[-1] == {"ALGO": "gigpo", "SWAP": "control", "SEED": 1}
    names = [cell_name(c) for c in cells]
    assert len(set(names)) == 12 and "ALGO=gigpo__SWAP=false__SEED=1" in names
    assert cell_name({"P": "a b/c", "Q": None, "R": [1, 2]}) == "P=a-b-c__Q=none__R=1-2"
    assert plan({"SEED": [0]}, tmp_path)[0].notebook == tmp_path / "SEED=0.ipynb"
    with pytest.raises(ValueError, match="collide"):
        plan({"P": ["a b", "a/b"]}, tmp_path)
    for bad in ({"SEED": 0}, {"SEED": []}, {"ALGO": "grpo"}):
        with pytest.raises(ValueError, match="non-empty list"):
            expand_grid(bad)


def _write_one_cell_often(out: str, seed: int) -> None:
    for _ in range(30):
        cells = plan({"SEED": [seed]}, Path(out))
        sweep_module._write_manifest(Path(out), Path("nb.ipynb"), {"SEED": [seed]}, {"P": 1}, cells)


def test_sweeps_started_at_once_into_one_folder_keep_every_cell_in_the_manifest(tmp_path):
    # one sweep per cell and core, all started together: no cell lost, no file written over half-way
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_one_cell_often, args=(str(tmp_path), seed)) for seed in range(6)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * 6
    manifest = json.loads((tmp_path / grid_module.MANIFEST).read_text())
    assert sorted(manifest["cells"]) == [f"SEED={seed}" for seed in range(6)]
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_figure_page_holds_the_figure_and_the_table_and_leaves_no_temporary_file(tmp_path):
    spec = {"data": [{"x": [0, 1], "y": [0.1, 0.3], "type": "scatter"}], "layout": {"title": "curve"}}
    table = pd.DataFrame({"cell": ["a", "b"], "success": [0.25, 0.5]})
    path = write_figure_html(spec, tmp_path / "fig.html", table, title="success")
    page = path.read_text()
    assert "Plotly.newPlot('fig'" in page and '"y": [0.1, 0.3]' in page
    assert "<table" in page and "0.250" in page and "<title>success</title>" in page
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tmp") == []


def test_mean_ci_and_summary():
    mean, _, high = mean_ci([0.2, 0.4, 0.6])
    assert mean == pytest.approx(0.4) and high - mean == pytest.approx(4.303 * 0.2 / 3**0.5)
    assert math.isnan(mean_ci([0.3])[1]) and math.isnan(mean_ci([])[0])
    table = pd.DataFrame({"algo.name": ["a", "a", "b"], "train.seed": [0, 1, 0], "x": [1.0, 3.0, 5.0]})
    summary = summarize(table.assign(ok=True), ["algo.name"])
    assert summary["metric"].tolist() == ["x", "x"]  # booleans and the seed are not metrics
    a = summary.set_index("algo.name").loc["a"]
    assert (a["n"], a["mean"]) == (2, 2.0) and a["ci_low"] < 2.0 < a["ci_high"]


def _fake_sweep(out: Path, grid: dict, results: dict[str, dict], **manifest) -> None:
    """A sweep folder whose named cells finished with the given results; the others never ran.
    ``manifest``: more of its manifest, e.g. the fixed ``parameters`` and the ``notebook``."""
    out.mkdir()
    cells = {c.name: c.params for c in plan(grid, out)}
    (out / "sweep.json").write_text(json.dumps({"keys": list(grid), "cells": cells} | manifest))
    for name, values in results.items():
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("")
        text = f"RSPO_RESULTS {json.dumps(values)}\n"
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells = [cell]
        nbformat.write(nb, out / f"{name}.ipynb")


def test_report_shows_every_seed_and_the_interval_of_finished_cells(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    grid = {"SEED": [0, 1, 2], "ALGO": ["grpo"], "SWAP": [False, True]}
    done = {
        "SEED=0__ALGO=grpo__SWAP=false": {"final_eval_success": 0.2, "final_eval_unseen_success": 0.1},
        "SEED=1__ALGO=grpo__SWAP=false": {"final_eval_success": 0.3, "final_eval_unseen_success": 0.2},
        "SEED=2__ALGO=grpo__SWAP=false": {"final_eval_success": 0.25, "final_eval_unseen_success": 0.3},
        "SEED=0__ALGO=grpo__SWAP=true": {"final_eval_success": 0.15, "final_eval_unseen_success": 0.5},
    }
    _fake_sweep(tmp_path / "sweep", grid, done)
    assert report_main([str(tmp_path / "sweep")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the grid's SWAP and SEED read as the config's variant and train.seed; algo.name has one value
    assert lines[0] == "| variant | seeds | final_eval_success | final_eval_unseen_success |"
    # seeds in order, mean, 95% t-interval (t = 4.303 for 3 seeds); a lone seed has no interval
    assert lines[2] == (
        "| plain | 0, 1, 2 | 20.0 / 30.0 / 25.0 → 25.0 [12.6, 37.4] | 10.0 / 20.0 / 30.0 → 20.0 [-4.8, 44.8] |"
    )
    assert lines[3] == "| rspo | 0 | 15.0 | 50.0 |"
    assert lines[-3].startswith("4 of 6 cells finished")
    # a sweep where only one variant has finished still names the variant
    (tmp_path / "half").mkdir()
    _fake_sweep(tmp_path / "half" / "sweep", grid, {k: v for k, v in done.items() if "false" in k})
    assert report_main([str(tmp_path / "half" / "sweep")]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("| plain | 0, 1, 2 | 20.0 / 30.0 / 25.0")
    (tmp_path / "sweep" / "SEED=1__ALGO=grpo__SWAP=true").mkdir()  # a run halfway, one not started
    (tmp_path / "sweep" / "SEED=1__ALGO=grpo__SWAP=true" / "metrics.jsonl").write_text(
        '{"iteration": 0, "eval/success": 0.25}\n{"iteration": 5, "rollout/cumulative_env_steps": 6012.0}\n'
    )
    assert report_main([str(tmp_path / "sweep")]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "- SEED=1__ALGO=grpo__SWAP=true: iteration 5, 6,012 env steps, last eval 25.0%",
        "- SEED=2__ALGO=grpo__SWAP=true: not started",
    ]
    assert report_main([str(tmp_path / "sweep"), "--metrics", "seconds"]) == 2
    assert "no recorded metric ['seconds']" in capsys.readouterr().err


def test_paired_report_differences_seed_by_seed_per_algorithm(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    grid = {"train.seed": [0, 1, 2], "algo.name": ["grpo", "gigpo"], "variant": ["plain", "rspo", "control"]}
    score = {  # (algo, variant) -> per seed; seed 2 of gigpo RSPO has not finished
        ("grpo", "plain"): [40.0, 42.0, 44.0],
        ("grpo", "rspo"): [43.0, 42.5, 48.0],
        ("grpo", "control"): [30.0, 40.0, 41.0],
        ("gigpo", "plain"): [41.0, 41.0, 45.0],
        ("gigpo", "rspo"): [46.0, 40.0, None],
        ("gigpo", "control"): [40.0, 40.0, 40.0],
    }
    done = {
        f"train.seed={seed}__algo.name={algo}__variant={swap}": {
            "final_eval_score": v[seed],
            "final_eval_success": 0.1 * seed,
        }
        for (algo, swap), v in score.items()
        for seed in range(3)
        if v[seed] is not None
    }
    _fake_sweep(tmp_path / "sweep", grid, done)
    args = [str(tmp_path / "sweep"), "--metrics", "final_eval_score", "final_eval_success"]
    # a pair named by the UPPERCASE parameters of archived grids means the same (SWAP=true: rspo)
    assert report_main([*args, "--paired", "variant=rspo,plain", "--paired", 'SWAP=true,"control"']) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index("Paired by seed:") + 2 :]
    assert table[0] == "| algo.name | difference | seeds | final_eval_score | final_eval_success |"
    # grpo RSPO − plain: +3.0 / +0.5 / +4.0, mean 2.5, sd 1.80, t(2) = 4.303 -> ±4.48
    assert table[2] == (
        "| grpo | variant=rspo − variant=plain | 0, 1, 2 | +3.0 / +0.5 / +4.0 → +2.5 [-2.0, +7.0] "
        "| +0.0 / +0.0 / +0.0 → +0.0 [+0.0, +0.0] |"
    )
    assert table[3] == (
        "| gigpo | variant=rspo − variant=plain | 0, 1 | +5.0 / -1.0 → +2.0 [-36.1, +40.1] "
        "| +0.0 / +0.0 → +0.0 [+0.0, +0.0] |"
    )
    assert table[4].startswith(
        "| grpo | variant=rspo − variant=control | 0, 1, 2 | +13.0 / +2.5 / +7.0 → +7.5"
    )
    assert table[5].startswith("| gigpo | variant=rspo − variant=control | 0, 1 | +6.0 / +0.0 → +3.0")
    assert report_main([*args, "--paired", "variant"]) == 2
    assert "--paired takes KEY=A,B" in capsys.readouterr().err
    assert report_main([*args, "--paired", "algo.lr=1,2"]) == 2
    assert "no grid key 'algo.lr'" in capsys.readouterr().err


def test_report_reads_several_folders_as_one_sweep(tmp_path, capsys):
    from rspo_kit.experiments.pairing import paired_table
    from rspo_kit.experiments.pooling import pooled_sweep
    from rspo_kit.experiments.report import main as report_main

    # a sweep, then an ablation of it in a second folder: a further knob, whose default the notebook says;
    # grids of notebook 04's parameters and config fields, read under the config's names
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("SWAP = True\nREPLAY_RATIO = None\nLR = 0.0")]
    notebook.cells[0].metadata["tags"] = ["parameters"]
    nbformat.write(notebook, tmp_path / "04.ipynb")
    fixed = {"notebook": str(tmp_path / "04.ipynb"), "parameters": {"algo.lr": 0.0001}}
    first = {
        f"SEED={s}__SWAP={v}": {"final_eval_score": 40.0 + s + 2 * (v == "true")}
        for s in (0, 1, 2)
        for v in ("true", "false")
    }
    _fake_sweep(tmp_path / "a", {"SEED": [0, 1, 2], "SWAP": [True, False]}, first, **fixed)
    later = {
        f"SEED={s}__SWAP=true__swap.replay_ratio=0.0": {"final_eval_score": 39.0 + 2 * s} for s in (0, 1)
    }
    _fake_sweep(
        tmp_path / "b", {"SEED": [0, 1, 2], "SWAP": [True], "swap.replay_ratio": [0.0]}, later, **fixed
    )
    folders = [str(tmp_path / "a"), str(tmp_path / "b")]
    pairs = ["--paired", "swap.replay_ratio=0.0,null", "--paired", "SWAP=true,false"]  # one table per key
    assert report_main([*folders, "--metrics", "final_eval_score", *pairs]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| variant | swap.replay_ratio | seeds | final_eval_score |"  # the notebook's None
    assert lines[2] == "| rspo | None | 0, 1, 2 | 42.0 / 43.0 / 44.0 → 43.0 [40.5, 45.5] |"
    assert lines[3] == "| plain | None | 0, 1, 2 | 40.0 / 41.0 / 42.0 → 41.0 [38.5, 43.5] |"
    assert lines[4] == "| rspo | 0.0 | 0, 1 | 39.0 / 41.0 → 40.0 [27.3, 52.7] |"
    paired = lines[lines.index("Paired by seed:") + 2 :]
    assert paired[0] == "| variant | difference | seeds | final_eval_score |"  # grouped by the other key
    assert paired[2] == (
        "| rspo | swap.replay_ratio=0.0 − swap.replay_ratio=null | 0, 1 | -3.0 / -2.0 → -2.5 [-8.9, +3.9] |"
    )
    assert paired[4:7] == [
        "| swap.replay_ratio | difference | seeds | final_eval_score |",
        "|---|---|---|---|",
        "| None | variant=rspo − variant=plain | 0, 1, 2 | +2.0 / +2.0 / +2.0 → +2.0 [+2.0, +2.0] |",
    ]
    # cells told apart by two keys (the ablation − plain): one table, grouped by neither key
    across = ["--paired", "SWAP=true&swap.replay_ratio=0.0,SWAP=false"]
    assert report_main([*folders, "--metrics", "final_eval_score", *across]) == 0
    lines = capsys.readouterr().out.splitlines()
    paired = lines[lines.index("Paired by seed:") + 2 :]
    # seeds 0, 1: 39 − 40, 41 − 41 -> mean -0.5, sd 0.7071, t(1) = 12.706 -> ±6.35
    assert paired[:3] == [
        "| difference | seeds | final_eval_score |",
        "|---|---|---|",
        "| variant=rspo, swap.replay_ratio=0.0 − variant=plain | 0, 1 | -1.0 / +0.0 → -0.5 [-6.9, +5.9] |",
    ]
    assert report_main([*folders, "--paired", "SWAP=true&REPLAY_RATIO,SWAP=false"]) == 2
    assert "K=A&L=C,K=B" in capsys.readouterr().err
    assert report_main([*folders, "--paired", "SWAP=true&NOPE=1,SWAP=false"]) == 2
    assert "no grid key 'NOPE'" in capsys.readouterr().err
    table = pd.DataFrame({"train.seed": [0, 0, 0], "variant": ["rspo", "plain", "rspo"], "x": [1.0] * 3})
    table["R"] = pd.Series([None, None, 0.0], dtype=object)  # as the report keeps grid values
    with pytest.raises(ValueError, match="share a seed"):  # variant tells the two R=None cells apart
        paired_table(table, [("R", 0.0, None)], [], ["x"])
    assert lines[-2:] == [
        f"8 of 9 cells finished ({', '.join(folders)})",
        "- SEED=2__SWAP=true__swap.replay_ratio=0.0: not started",
    ]
    # a protocol that differs between the folders becomes a column instead of being pooled unseen
    _fake_sweep(
        tmp_path / "c", {"SEED": [3], "SWAP": [True]}, {"SEED=3__SWAP=true": {"final_eval_score": 50.0}}
    )
    assert report_main([folders[0], str(tmp_path / "c"), "--metrics", "final_eval_score"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| variant | algo.lr | seeds | final_eval_score |"  # c: the notebook's (unreadable)
    assert lines[2].startswith("| rspo | 0.0001 | 0, 1, 2 | ") and lines[4] == "| rspo | None | 3 | 50.0 |"
    # one folder whose later grid added a key: its earlier cells ran with the notebook's default
    later = {"SEED=0__SWAP=false__swap.replay_ratio=0.0": {"final_eval_score": 35.0}}
    _fake_sweep(tmp_path / "d", {"SEED": [0], "SWAP": [False], "swap.replay_ratio": [0.0]}, later, **fixed)
    sweep = json.loads((tmp_path / "d" / "sweep.json").read_text())
    sweep["cells"]["SEED=0__SWAP=false"] = {"SEED": 0, "SWAP": False}  # the first grid's cell
    (tmp_path / "d" / "sweep.json").write_text(json.dumps(sweep))
    _fake_sweep(
        tmp_path / "e", {"SEED": [0], "SWAP": [False]}, {"SEED=0__SWAP=false": {"final_eval_score": 41.0}}
    )
    (tmp_path / "e" / "SEED=0__SWAP=false.ipynb").rename(tmp_path / "d" / "SEED=0__SWAP=false.ipynb")
    assert report_main([str(tmp_path / "d"), "--metrics", "final_eval_score"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:4] == ["| 0.0 | 0 | 35.0 |", "| None | 0 | 41.0 |"]  # swap.replay_ratio; not NaN
    assert report_main([folders[0], folders[0]]) == 2  # the same cells twice
    assert "finished in both" in capsys.readouterr().err
    # a cell an archive lists unfinished, finished in a later folder: read from there
    _fake_sweep(
        tmp_path / "f", {"SEED": [5, 6], "SWAP": [True]}, {"SEED=5__SWAP=true": {"final_eval_score": 1.0}}
    )
    _fake_sweep(
        tmp_path / "g", {"SEED": [6], "SWAP": [True]}, {"SEED=6__SWAP=true": {"final_eval_score": 2.0}}
    )
    manifest, rows, where = pooled_sweep([tmp_path / "f", tmp_path / "g"])
    assert sorted(r["cell"] for r in rows) == ["SEED=5__SWAP=true", "SEED=6__SWAP=true"]
    assert where["SEED=6__SWAP=true"] == tmp_path / "g" / "SEED=6__SWAP=true" and len(manifest["cells"]) == 2


def test_report_draws_the_curves_of_several_folders_in_one_figure(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    def cell(seed: int, rise: float) -> dict:
        return {
            "final_eval_score": 40.0 + seed,
            "curve_env_steps": [0, 100, 200],
            "curve_score": [40, 40 + rise, 50],
        }

    # seeds 0-1 in one folder, seed 2 in another
    first = {f"SEED={s}__SWAP={v}": cell(s, 2.0 * s) for s in (0, 1) for v in ("true", "false")}
    _fake_sweep(tmp_path / "a", {"SEED": [0, 1], "SWAP": [True, False]}, first)
    _fake_sweep(tmp_path / "b", {"SEED": [2], "SWAP": [True, False]}, {"SEED=2__SWAP=true": cell(2, 7.0)})
    page = tmp_path / "pages" / "curves.html"
    page.parent.mkdir()
    folders = [str(tmp_path / "a"), str(tmp_path / "b")]
    args = [*folders, "--metrics", "final_eval_score", "--curves", str(page), "--curve", "curve_score"]
    assert report_main(args) == 0
    assert f"wrote {page}" in capsys.readouterr().err
    html = page.read_text()
    spec, _ = json.JSONDecoder().raw_decode(html.split("Plotly.newPlot('fig', ")[1])  # the traces
    means = {t["name"]: t["y"] for t in spec if t["line"]["width"] == 3}
    assert set(means) == {"variant=rspo (mean of 3)", "variant=plain (mean of 2)"}  # both folders' seeds
    assert means["variant=rspo (mean of 3)"][-1] == pytest.approx(50.0)
    # the curve at 100 env steps is the mean of the three seeds' 40, 42 and 47 (on the shared grid)
    grid = next(t["x"] for t in spec if t["name"] == "variant=rspo (mean of 3)")
    at_100 = float(np.interp(100, grid, means["variant=rspo (mean of 3)"]))
    assert at_100 == pytest.approx((40 + 42 + 47) / 3, abs=0.3)
    assert sorted(t["name"] for t in spec if t["line"]["width"] == 1) == sorted([*first, "SEED=2__SWAP=true"])
    assert "41.0" in html  # the table under the figure: plain's mean over seeds 0 and 1
    # a curve no cell recorded fails before the report prints, naming those recorded
    assert report_main([*folders, "--curves", str(page), "--curve", "curve_success"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no finished cell recorded 'curve_success'; recorded: curve_score" in err


def test_aggregate_pooled_writes_beside_the_folders_it_reads_and_leaves_them_as_they_were(tmp_path):
    from rspo_kit.experiments.pooling import aggregate_pooled, pooled_status

    first = {
        f"SEED={s}__SWAP={v}": {
            "final_success": 0.1 * s,
            "curve_env_steps": [0, 9],
            "curve_success": [0.0, 0.1 * s],
        }
        for s in (0, 1)
        for v in ("true", "false")
    }
    _fake_sweep(tmp_path / "a", {"SEED": [0, 1], "SWAP": [True, False]}, first)
    _fake_sweep(
        tmp_path / "b", {"SEED": [2], "SWAP": [True, False]}, {"SEED=2__SWAP=true": {"final_success": 0.5}}
    )
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    table = aggregate_pooled([tmp_path / "a", tmp_path / "b"], tmp_path / "pooled", curve="curve_success")
    assert (table.attrs["cells"], table.attrs["finished"]) == (6, 5) and len(table) == 5
    assert {p: p.read_bytes() for p in before} == before  # nothing rewritten in the folders read
    assert not [
        p for p in tmp_path.rglob("*") if p.is_file() and p not in before and p.parent.name != "pooled"
    ]
    written = pd.read_csv(tmp_path / "pooled" / "pooled_results.csv")
    assert sorted(written["cell"]) == sorted(table["cell"])
    summary = pd.read_csv(tmp_path / "pooled" / "pooled_summary.csv")
    row = summary[(summary["metric"] == "final_success") & (summary["variant"] == "rspo")].iloc[0]
    assert (row["n"], row["mean"]) == (3, pytest.approx((0.0 + 0.1 + 0.5) / 3))  # seeds of both folders
    assert "a, b: curve_success vs env steps" in (tmp_path / "pooled" / "pooled_curves.html").read_text()
    status = {o.name: o.status for o in pooled_status([tmp_path / "a", tmp_path / "b"])}
    assert status["SEED=2__SWAP=true"] == "skipped" and status["SEED=2__SWAP=false"] == "pending"
    assert len(status) == 6


def test_cell_progress_shows_the_last_evaluation_and_a_score_of_its_own(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(
        '{"iteration": 0, "eval/success": 0.025, "eval/score": 40.25}\n'
        '{"iteration": 5, "rollout/cumulative_env_steps": 1200.0, "eval/success": 0.05, "eval/score": 51.9}\n'
        '{"iteration": 6, "rollout/cumulative_env_steps": 1410.0}\n'
    )
    assert cells_module.cell_progress(tmp_path) == "iteration 6, 1,410 env steps, last eval 5.0% (score 51.9)"
    (tmp_path / "metrics.jsonl").write_text('{"iteration": 2, "eval/success": 0.25, "eval/score": 0.25}\n')
    assert cells_module.cell_progress(tmp_path) == "iteration 2, last eval 25.0%"  # ALFWorld: score = success
    (tmp_path / "metrics.jsonl").write_text('{"iteration": 3, "eval/su')  # caught halfway through a write
    assert cells_module.cell_progress(tmp_path) is None


def test_report_rows_follow_the_grid_not_the_alphabet(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    grid = {"SEED": [0, 1], "SWAP": [False, True, "control"]}  # cell names sort control, false, true
    done = {
        f"SEED={s}__SWAP={v}": {"final_success": 0.1} for s in (1, 0) for v in ("control", "true", "false")
    }
    _fake_sweep(tmp_path / "sweep", grid, done)
    assert report_main([str(tmp_path / "sweep")]) == 0
    rows = capsys.readouterr().out.splitlines()[2:5]
    assert [r.split(" | ")[0] for r in rows] == ["| plain", "| rspo", "| control"]
    assert all(" | 0, 1 | " in r for r in rows)


def test_report_statistics_read_each_finished_run_and_show_only_what_some_run_has(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    grid = {"SEED": [0, 1], "SWAP": [False, True]}
    done = {
        f"SEED={s}__SWAP={v}": {"final_eval_success": 0.1 * (s + 1)}
        for s in (0, 1)
        for v in ("false", "true")
    }
    _fake_sweep(tmp_path / "sweep", grid, done)
    for name in done:
        seed, rspo = int(name[5]), name.endswith("true")
        rows = [{"iteration": 0, "rollout/cumulative_env_steps": 0.0}]
        for k in (1, 2):
            row = {
                "iteration": k,
                "rollout/cumulative_env_steps": 100.0 * k,
                "rollout/success": 0.2 * k + 0.1 * seed,
            }
            row["rollout/env_steps"] = 75.0 if rspo else 100.0  # RSPO's explorer took a quarter of the steps
            if rspo:
                row |= {"swap/rescued_groups": float(k + seed), "swap/explorer_success": 0.5}
            rows.append(row)
        (tmp_path / "sweep" / name).mkdir()
        (tmp_path / "sweep" / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert report_main([str(tmp_path / "sweep"), "--statistics"]) == 0
    out = capsys.readouterr().out.split("\n\n")
    stats = out[1].splitlines()
    assert stats[0] == (
        "| variant | seeds | actor_updates | explorer_steps_share | rollout_start_success | rollout_end_success "
        "| explorer_success | explorer_minus_actor_success | rescued_groups |"  # no tau, IS weights or KL
    )
    # rollout success: the first and last 10 iterations, here both of them
    assert stats[2] == (
        "| plain | 0, 1 | 2 / 2 → 2 [2, 2] | 0.0 / 0.0 → 0.0 [0.0, 0.0] | 30.0 / 40.0 → 35.0 [-28.5, 98.5] "
        "| 30.0 / 40.0 → 35.0 [-28.5, 98.5] | — | — | — |"  # plain runs have no swap
    )
    assert stats[3].startswith("| rspo | 0, 1 | 2 / 2 → 2 [2, 2] | 25.0 / 25.0 → 25.0 [25.0, 25.0] |")
    assert stats[3].endswith(  # explorer minus actor: (0.3 + 0.1) / 2 and (0.2 + 0) / 2; rescued 1+2, 2+3
        "| 50.0 / 50.0 → 50.0 [50.0, 50.0] | 20.0 / 10.0 → 15.0 [-48.5, 78.5] | 3 / 5 → 4 [-8.71, 16.7] |"
    )


def test_report_reads_table_6_s_state_repeats_at_the_same_updates_of_a_and_pairs_them_by_seed(
    tmp_path, capsys
):
    from rspo_kit.experiments.report import main as report_main

    grid = {"SEED": [0, 1], "SWAP": [False, True]}
    done = {f"SEED={s}__SWAP={v}": {"final_eval_success": 0.5} for s in (0, 1) for v in ("false", "true")}
    _fake_sweep(tmp_path / "sweep", grid, done)
    for name in done:
        seed, rspo = int(name[5]), name.endswith("true")
        rows = [{"iteration": 0, "budget/actor_updates": 0.0}]
        if rspo:  # two loops of the paper's loop, three updates of A each: rows at 3 and 6 updates
            shares = [0.5 - 0.1 * seed, 0.2 - 0.1 * seed]
            rows += [{"iteration": i + 1, "budget/actor_updates": 3.0 * (i + 1)} for i in range(2)]
        else:  # six updates of A, one a row
            shares = [0.9, 0.8, 0.7 + 0.1 * seed, 0.6, 0.5, 0.4 + 0.1 * seed]
            rows += [{"iteration": i + 1, "budget/actor_updates": float(i + 1)} for i in range(6)]
        for row, share in zip(rows[1:], shares, strict=True):
            row["rollout/repeated_state_share"] = share
        (tmp_path / "sweep" / name).mkdir()
        (tmp_path / "sweep" / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    points = ["repeats_third_share", "repeats_two_thirds_share", "repeats_end_share"]
    assert report_main([str(tmp_path / "sweep"), "--metrics", *points, "--paired", "variant=rspo,plain"]) == 0
    out = capsys.readouterr().out.split("\n\n")
    table = out[0].splitlines()
    assert (
        table[0] == "| variant | seeds | repeats_third_share | repeats_two_thirds_share | repeats_end_share |"
    )
    # updates 2, 4 and 6 of A: plain's rows 2, 4, 6; RSPO's loops that hold them (3, 6, 6)
    assert table[2].startswith(
        "| plain | 0, 1 | 80.0 / 80.0 → 80.0 [80.0, 80.0] | 60.0 / 60.0 → 60.0 [60.0, 60.0] |"
    )
    assert table[2].endswith("| 40.0 / 50.0 → 45.0 [-18.5, 108.5] |")
    assert table[3].startswith(
        "| rspo | 0, 1 | 50.0 / 40.0 → 45.0 [-18.5, 108.5] | 20.0 / 10.0 → 15.0 [-48.5, 78.5] |"
    )
    paired = out[2].splitlines()
    assert paired[2] == (
        "| variant=rspo − variant=plain | 0, 1 | -30.0 / -40.0 → -35.0 [-98.5, +28.5] "
        "| -40.0 / -50.0 → -45.0 [-108.5, +18.5] | -20.0 / -40.0 → -30.0 [-157.1, +97.1] |"
    )
    assert not any(
        "task" in part for part in out
    )  # no task-by-task tables: nothing here is a final evaluation


def test_report_counts_lift_offs_seed_by_seed_with_exact_tests(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    grid = {"SEED": [0, 1, 2, 3, 4, 5], "SWAP": [False, True]}
    ended = {"false": [0.0, 0.5, 0.0, 0.0, 0.01, 0.0], "true": [0.75, 0.0, 0.6, 0.45, 0.0, 0.9]}
    done = {
        f"SEED={s}__SWAP={v}": {"final_sampled_eval_success": ended[v][s]} for s in range(6) for v in ended
    }
    del done["SEED=5__SWAP=false"]  # a seed one side lacks counts for its own side, not for the pairs
    _fake_sweep(tmp_path / "sweep", grid, done)
    args = [str(tmp_path / "sweep"), "--paired", "variant=rspo,plain"]
    assert report_main([*args, "--lift-off", "final_sampled_eval_success", "0.4"]) == 0
    out = capsys.readouterr().out.split("\n\n")
    at = out.index("Lift-off, seed by seed:")
    table = out[at + 1].splitlines()
    assert table[0] == (
        "| difference | lifted off (final_sampled_eval_success > 40.0) | only a / only b "
        "| sign test p (paired) | Fisher p (unpaired) |"
    )
    # rspo: 4 of 6 (0, 2, 3, 5); plain: 1 of 5 (1); of the five shared seeds 3 only rspo, 1 only plain
    # (sign test: 2 * 5/16); Fisher on 4/6 vs 1/5: the tables as or less likely than this one
    assert (
        table[2]
        == "| variant=rspo − variant=plain | 4 of 6 (0, 2, 3, 5) / 1 of 5 (1) | 3 / 1 | 0.625 | 0.242 |"
    )
    assert report_main(args) == 0
    assert "Lift-off" not in capsys.readouterr().out  # only where asked for
    assert report_main([str(tmp_path / "sweep"), "--lift-off", "final_sampled_eval_success", "0.4"]) == 2
    assert "give --paired too" in capsys.readouterr().err
    assert report_main([*args, "--lift-off", "final_success", "0.4"]) == 2
    assert "no metric 'final_success'" in capsys.readouterr().err


def test_report_statistics_show_the_cells_still_running_as_far_as_they_got(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    grid = {"train.seed": [0], "swap.explorer_lr": [1e-4, 3e-4, 1e-3]}
    _fake_sweep(tmp_path / "sweep", grid, {})  # nothing finished; 1e-3 has not started
    for lr, edge in ((1e-4, 0.0), (3e-4, 0.25)):
        rows = [{"iteration": 0, "rollout/cumulative_env_steps": 0.0}]
        for k in (1, 2):
            rows.append(
                {
                    "iteration": k,
                    "rollout/cumulative_env_steps": 100.0 * k,
                    "rollout/env_steps": 60.0,
                    "rollout/success": 0.25,
                    "swap/explorer_success": 0.25 + edge,
                    "explorer/loss/approx_kl": lr * 10,
                }
            )
        run = tmp_path / "sweep" / f"train.seed=0__swap.explorer_lr={lr}"
        run.mkdir()
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert report_main([str(tmp_path / "sweep"), "--statistics"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Not finished, so far:\n\n| swap.explorer_lr | seeds | actor_updates |")
    header, _, *lines = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()[2:6]]
    rows = {line[0]: dict(zip(header, line, strict=True)) for line in lines}
    assert set(rows) == {"0.0001", "0.0003"}  # the cell that never started has no row
    assert rows["0.0003"]["explorer_minus_actor_success"] == "25.0"
    assert rows["0.0001"]["explorer_approx_kl"] == "0.001"
    assert "none of 3 cells has finished yet" in out and "swap.explorer_lr=0.001: not started" in out


def test_report_shows_scores_in_their_units_and_the_trained_outcome_where_it_is_not_success(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    # WebShop with reward.outcome_mode "score": scores in points (0-100), outcome_return = score / 100
    grid = {"SEED": [0], "SWAP": [False, True]}
    done = {
        "SEED=0__SWAP=false": {"final_eval_score": 45.25, "final_score": 0.5, "final_eval_success": 0.05},
        "SEED=0__SWAP=true": {"final_eval_score": 50.0, "final_score": 0.25, "final_eval_success": 0.0},
    }
    _fake_sweep(tmp_path / "sweep", grid, done)
    for name in done:
        rows = [{"iteration": 0, "rollout/cumulative_env_steps": 0.0}]
        for k in (1, 2):
            row = {"iteration": k, "rollout/cumulative_env_steps": 100.0 * k, "rollout/env_steps": 80.0}
            row |= {"rollout/success": 0.0, "rollout/outcome_return": 0.4 + 0.1 * k}
            if name.endswith("true"):
                row |= {"swap/explorer_success": 0.125, "explorer_rollout/outcome_return": 0.6}
            rows.append(row)
        (tmp_path / "sweep" / name).mkdir()
        (tmp_path / "sweep" / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics = ["final_eval_score", "final_score", "final_eval_success"]
    assert report_main([str(tmp_path / "sweep"), "--statistics", "--metrics", *metrics]) == 0
    results, stats = [_table(t) for t in capsys.readouterr().out.split("\n\n")[:2]]
    # points stay points; a score that is a fraction (ALFWorld's) and a success rate are in percent
    assert [results[v]["final_eval_score"] for v in ("plain", "rspo")] == ["45.2", "50.0"]
    assert [results[v]["final_score"] for v in ("plain", "rspo")] == ["50.0", "25.0"]
    assert results["plain"]["final_eval_success"] == "5.0"
    # the outcome the runs train on, where it is not the success: (0.5 + 0.6) / 2 over both windows of
    # 10 iterations; the explorer's 0.6 minus that
    assert stats["plain"]["rollout_start_outcome"] == stats["plain"]["rollout_end_outcome"] == "55.0"
    assert stats["plain"]["explorer_outcome"] == "—"
    rspo = stats["rspo"]
    assert (rspo["explorer_outcome"], rspo["explorer_minus_actor_outcome"]) == ("60.0", "5.0")
    assert rspo["explorer_minus_actor_success"] == "12.5"


def test_report_statistics_leave_out_the_outcome_where_it_is_the_success():
    from rspo_kit.experiments.training_statistics import run_statistics

    rows = {"iteration": [0, 1, 2], "rollout/cumulative_env_steps": [0, 90, 180]}
    rows |= {
        "rollout/env_steps": [None, 60, 60],
        "rollout/success": [None, 0.25, 0.5],
        "rollout/outcome_return": [None, 0.25, 0.5],
    }
    rows |= {"swap/explorer_success": [None, 0.5, 0.5], "explorer_rollout/outcome_return": [None, 0.5, 0.5]}
    stats = run_statistics(pd.DataFrame(rows))
    assert stats["explorer_minus_actor_success"] == pytest.approx(0.125)
    assert all(math.isnan(stats[k]) for k in ("rollout_start_outcome", "explorer_minus_actor_outcome"))


def _table(markdown: str) -> dict[str, dict[str, str]]:
    """A report's Markdown table as {first column: {header: cell}}."""
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in markdown.strip().splitlines()]
    header, _, *body = lines
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


# ------------------------------------------------------------------------------------- the sweep
def test_sweep_runs_resumes_and_aggregates(tiny_notebook, tmp_path):
    out, log, fail = tmp_path / "sweep", tmp_path / "runs.log", tmp_path / "fail"
    grid = {"ALGO": ["grpo", "gigpo"], "SEED": [0, 1]}
    fixed = {"LOG": str(log), "FAIL_IF": str(fail)}

    # first the grpo half of the grid finishes
    first = run_sweep(tiny_notebook, {"ALGO": ["grpo"], "SEED": [0, 1]}, out, parameters=fixed, workers=2)
    assert [o.status for o in first] == ["finished", "finished"]
    assert [o.status for o in sweep_status(grid, out)] == ["skipped", "skipped", "pending", "pending"]
    # the whole grid: grpo cells are skipped, the gigpo cells fail
    fail.touch()
    statuses = {o.name: o.status for o in run_sweep(tiny_notebook, grid, out, parameters=fixed, log=None)}
    assert statuses == {
        "ALGO=grpo__SEED=0": "skipped",
        "ALGO=grpo__SEED=1": "skipped",
        "ALGO=gigpo__SEED=0": "failed",
        "ALGO=gigpo__SEED=1": "failed",
    }
    assert aggregate(out).attrs["finished"] == 2
    # a killed cell leaves an output notebook without results: it counts as unfinished
    (out / "ALGO=gigpo__SEED=1.ipynb").write_text(tiny_notebook.read_text())
    # and its run directory stays for the rerun, which may continue from it (04_training does)
    (out / "ALGO=gigpo__SEED=1").mkdir(exist_ok=True)
    (out / "ALGO=gigpo__SEED=1" / "checkpoint").touch()

    fail.unlink()
    before = _log_lines(log)
    outcomes = run_sweep(tiny_notebook, grid, out, parameters=fixed, workers=2, log=None)
    assert [o.status for o in outcomes] == ["skipped", "skipped", "finished", "finished"]
    assert sorted(_log_lines(log)[len(before) :]) == ["gigpo/False/0", "gigpo/False/1"]  # only those reran
    assert (out / "ALGO=gigpo__SEED=1" / "checkpoint").is_file()

    # each cell got its own run dir, its share of the cores as threads, and no progress bars
    results = read_results(out / "ALGO=gigpo__SEED=0.ipynb")
    assert results["threads"] == int(results["omp"]) >= 1 and results["bars_off"] == "1"
    assert (out / "ALGO=gigpo__SEED=0.log").is_file()  # the kernel's own output, kept out of the notebook
    assert json.loads((out / "ALGO=gigpo__SEED=0" / "results.json").read_text()) == results

    table = aggregate(out)
    assert table.attrs["finished"] == table.attrs["cells"] == 4
    # the notebook's ALGO and SEED, read under the config's names (as archived grids of notebook 04 are)
    assert set(table.columns) >= {"cell", "algo.name", "train.seed", "final_success"}
    assert "curve_success" not in table  # lists stay out of the table
    by_cell = table.set_index("cell")["final_success"]
    assert by_cell["ALGO=gigpo__SEED=1"] == pytest.approx(0.41)
    assert by_cell["ALGO=grpo__SEED=0"] == pytest.approx(0.2)
    summary = pd.read_csv(out / "summary.csv")
    row = summary[(summary["algo.name"] == "gigpo") & (summary.metric == "final_success")].iloc[0]
    assert (row["n"], row["mean"]) == (2, pytest.approx(0.405))
    page = (out / "curves.html").read_text()
    assert "Plotly.newPlot" in page and "algo.name=gigpo (mean of 2)" in page and "<table" in page
    assert (out / "plotly.min.js").is_file()  # offline plotly.js next to the page
    assert "window.Plotly || document.write" in page and "cdn.plot.ly/plotly-" in page  # copied without it
    assert pd.read_csv(out / "results.csv").shape[0] == 4


def test_a_quiet_sweep_reports_where_its_running_cells_are(tiny_notebook, tmp_path):
    said = []
    fixed = {"LOG": str(tmp_path / "log"), "SLEEP": 6}
    run_sweep(tiny_notebook, {"SEED": [0]}, tmp_path / "out", parameters=fixed, progress_s=1, log=said.append)
    assert "  SEED=0: iteration 3, 1,234 env steps" in said
    assert said[-1].startswith("  SEED=0: finished")


def test_cli_passes_typed_parameters_and_exits_nonzero_on_failure(tiny_notebook, tmp_path):
    out, log = tmp_path / "cli", tmp_path / "cli.log"
    cmd = [sys.executable, "-m", "rspo_kit.experiments.sweep", str(tiny_notebook)]
    cmd += ["--grid", '{"SWAP": [true, false]}', "--out", str(out), "-p", "LOG", str(log), "-p", "SEED", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 of 2 cells finished; 0 failed" in done.stdout and "wrote" in done.stdout
    assert sorted(_log_lines(log)) == ["grpo/False/2", "grpo/True/2"]  # SWAP is a bool, SEED an int
    assert read_results(out / "SWAP=true.ipynb")["final_success"] == pytest.approx(0.32)

    (tmp_path / "fail").touch()
    cmd[cmd.index(str(out))] = str(tmp_path / "cli_failing")
    done = subprocess.run([*cmd, "-p", "FAIL_IF", str(tmp_path / "fail")], capture_output=True, text=True)
    assert done.returncode == 1 and "FAILED RuntimeError: asked to fail" in done.stdout
    # --fresh: unfinished cells start from scratch, without what their last attempt left behind
    left = tmp_path / "cli_failing" / "SWAP=true" / "checkpoint"
    left.parent.mkdir(exist_ok=True)
    left.touch()
    done = subprocess.run(
        [*cmd, "-p", "FAIL_IF", str(tmp_path / "fail"), "--fresh"], capture_output=True, text=True
    )
    assert done.returncode == 1 and not left.exists()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_the_sweep_stops_its_workers_and_kernels(tiny_notebook, tmp_path, sig):
    out, log = tmp_path / "killed", tmp_path / "started.log"
    cmd = [sys.executable, "-m", "rspo_kit.experiments.sweep", str(tiny_notebook), "--workers", "2"]
    cmd += [
        "--grid",
        '{"SEED": [0, 1, 2, 3]}',
        "--out",
        str(out),
        "-p",
        "LOG",
        str(log),
        "-p",
        "SLEEP",
        "600",
    ]
    parent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(_log_lines(log)) < 2:  # both workers' kernels are inside the notebook
            assert parent.poll() is None and time.monotonic() < deadline, "the sweep did not start"
            time.sleep(0.5)
        below = descendants(parent.pid)
        assert len(below) >= 4  # two workers, two kernels
        parent.send_signal(sig)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in below) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in below if alive(pid)], "workers or kernels outlived the sweep"
    finally:
        if parent.poll() is None:
            parent.kill()
    time.sleep(2)
    assert len(_log_lines(log)) == 2  # the queued cells never started
    if sig == signal.SIGTERM:
        assert parent.returncode == 130 and "sweep stopped" in parent.stdout.read()


def _episode_rows(wins: list[int]) -> list[dict]:
    """``final/eval`` episodes of tasks t0, t1, ... won as ``wins`` says."""
    return [
        {"task_id": f"t{i}", "kind": "pick", "sample": 0, "won": bool(w), "score": float(w), "steps": 5}
        for i, w in enumerate(wins)
    ]


def _episode_sweep(tmp_path: Path) -> Path:
    """A finished sweep of SWAP × SEED whose cells recorded their final episodes (but one)."""
    from rspo_kit.records import write_episodes

    grid = {"SEED": [0, 1], "SWAP": [True, False, "control"]}
    won = {  # cell -> per seed, tasks t0..t3 of final/eval
        "true": [[1, 1, 0, 0], [1, 0, 1, 0]],
        "false": [[0, 1, 0, 0], [1, 0, 0, 1]],
        "control": [[0, 0, 0, 0], None],  # seed 1 finished before runs recorded their episodes
    }
    done = {f"SEED={s}__SWAP={v}": {"final_eval_success": 0.25} for v in won for s in (0, 1)}
    _fake_sweep(tmp_path / "sweep", grid, done)
    for v, per_seed in won.items():
        for s, wins in enumerate(per_seed):
            if wins is None:
                continue
            ep = _episode_rows(wins)
            write_episodes(tmp_path / "sweep" / f"SEED={s}__SWAP={v}", "final/eval", ep)
            # a scored env (points): two tasks, the second only evaluated by the RSPO cells' seed 0
            scored = [
                {**e, "score": 50.0 + 10 * s + 20 * (v == "true")} for e in ep[: 2 if v == "true" else 1]
            ]
            write_episodes(tmp_path / "sweep" / f"SEED={s}__SWAP={v}", "final_sampled/eval", scored)
    return tmp_path / "sweep"


def test_paired_report_compares_the_final_episodes_task_by_task(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    sweep = _episode_sweep(tmp_path)
    pairs = ["--paired", "SWAP=true,false", "--paired", "SWAP=true,control"]
    assert report_main([str(sweep), *pairs]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Paired by seed and task"))
    assert lines[first].endswith("; 1 finished cells recorded no episodes):")
    table = lines[first + 2 : first + 7]
    assert table[0] == (
        "| difference | seeds | evaluation | tasks | episodes won only by a / b | success | score |"
    )
    # per task, the mean over seeds of a − b: +0.5, 0, +0.5, -0.5 -> mean 0.125, sd 0.4787,
    # t(3) = 3.1824 -> ±0.7617; won only by RSPO: seed 0's t0, seed 1's t2; only by plain: seed 1's t3
    assert table[2] == (
        "| variant=rspo − variant=plain | 0, 1 | final/eval | 4 | 2 / 1 | +12.5 [-63.7, +88.7] | — |"
    )
    # the sampled evaluation pairs on the one task both have (t0: +1, then 0); its scores are points,
    # +20 each seed; one task has no interval
    assert table[3] == (
        "| variant=rspo − variant=plain | 0, 1 | final_sampled/eval | 1 | 1 / 0 | +50.0 [—, —] | +20.0 [—, —] |"
    )
    # against the control only seed 0 has episodes in both: t0 won by RSPO alone
    assert table[4] == (
        "| variant=rspo − variant=control | 0 | final/eval | 4 | 2 / 0 | +50.0 [-41.9, +141.9] | — |"
    )


def test_report_compares_every_variant_with_a_reference_run_task_by_task(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main
    from rspo_kit.records import write_episodes

    sweep = _episode_sweep(tmp_path)
    start = tmp_path / "warmstart_run"  # its greedy eval only: the cells' sampled one is left out
    write_episodes(start, "final/eval", _episode_rows([0, 1, 1, 0]))
    assert report_main([str(sweep), "--reference", str(start)]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Against the reference run"))
    assert lines[first].endswith("; 1 finished cells recorded no episodes):")
    table = _table("\n".join(lines[first + 2 : first + 7]))
    assert list(table["rspo"]) == [
        *("variant", "seeds", "evaluation", "tasks"),
        *("episodes won only by the runs / the reference", "success − reference"),
    ]
    # RSPO's tasks averaged over seeds 1, .5, .5, 0 against 0, 1, 1, 0: +1, -.5, -.5, 0 -> mean 0,
    # sd 0.7071, t(3) = 3.1824 -> ±1.125; only the runs won seed 0's and seed 1's t0, only the
    # reference t2 (seed 0) and t1 (seed 1)
    assert table["rspo"] == table["rspo"] | {
        "seeds": "0, 1",
        "evaluation": "final/eval",
        "tasks": "4",
        "episodes won only by the runs / the reference": "2 / 2",
        "success − reference": "+0.0 [-112.5, +112.5]",
    }
    # plain: .5, .5, 0, .5 − ref = +.5, -.5, -1, +.5 -> -0.125, sd 0.75 -> ±1.193; 2 / 3 episodes
    assert table["plain"]["success − reference"] == "-12.5 [-131.8, +106.8]"
    assert table["plain"]["episodes won only by the runs / the reference"] == "2 / 3"
    # the control's seed 1 has no episodes: its seed 0 alone, which won nothing (-1 on t1 and t2)
    assert table["control"]["seeds"] == "0"
    assert table["control"]["success − reference"] == "-50.0 [-141.9, +41.9]"
    assert len(table) == 3  # no sampled rows: the reference has no sampled evaluation

    assert report_main([str(sweep), "--reference", str(tmp_path / "nowhere")]) == 2
    assert "no final_episodes.parquet in" in capsys.readouterr().err


def test_an_archived_sweep_reports_as_the_sweep_did_without_its_notebooks(tmp_path, capsys):
    from rspo_kit.experiments.archive import main as archive_main
    from rspo_kit.experiments.report import main as report_main
    from rspo_kit.records import write_episodes

    sweep = _episode_sweep(tmp_path)
    for name in json.loads((sweep / "sweep.json").read_text())["cells"]:  # logs for --statistics
        rows = [
            {"iteration": k, "rollout/cumulative_env_steps": 100.0 * k, "rollout/success": 0.1 * k}
            for k in (0, 1)
        ]
        (sweep / name).mkdir(exist_ok=True)
        (sweep / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_episodes(sweep / "warmstart_run", "final/eval", _episode_rows([0, 1, 1, 0]))
    (sweep / "SEED=0__SWAP=true" / "checkpoint.pt").write_bytes(b"\0" * 1000)  # not archived
    from rspo_kit.records import write_start

    write_start(sweep / "SEED=0__SWAP=true", {"weights_sha256": "ab" * 32})  # what it started from
    args = ["--paired", "SWAP=true,false", "--statistics"]
    assert report_main([str(sweep), *args, "--reference", str(sweep / "warmstart_run")]) == 0
    before = capsys.readouterr().out

    archive = tmp_path / "results" / "archive"
    assert archive_main([str(sweep), str(archive)]) == 0
    assert capsys.readouterr().out.startswith("archived 6 finished cells")
    assert not list(archive.glob("*.ipynb")) and not list(archive.rglob("checkpoint.pt"))
    assert sorted(p.name for p in (archive / "SEED=0__SWAP=true").iterdir()) == [
        "final_episodes.parquet",
        "metrics.jsonl",
        "results.json",
        "start.json",
    ]
    assert report_main([str(archive), *args, "--reference", str(archive / "warmstart_run")]) == 0
    after = capsys.readouterr().out
    assert after == before.replace(str(sweep), str(archive))
    assert "Paired by seed and task" in after and "Against the reference run" in after
    assert aggregate(archive)["final_eval_success"].tolist() == [0.25] * 6

    # a cell whose notebook exists but did not finish is not finished, whatever its run folder holds
    (sweep / "SEED=1__SWAP=false").mkdir(exist_ok=True)
    (sweep / "SEED=1__SWAP=false" / "results.json").write_text('{"final_eval_success": 0.9}')
    (sweep / "SEED=1__SWAP=false.ipynb").write_text("{")  # killed while it was being written
    assert len(aggregate(sweep)) == 5
    assert archive_main([str(sweep), str(sweep)]) == 2
    assert "not into itself" in capsys.readouterr().err


def test_report_names_the_policies_the_cells_started_from(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main
    from rspo_kit.records import write_episodes, write_start

    sweep = _episode_sweep(tmp_path)
    assert report_main([str(sweep)]) == 0
    assert "Starting policies" not in capsys.readouterr().out  # runs before start.json: nothing to say
    a, b = "a" * 64, "b" * 64
    for name in ("SEED=0__SWAP=true", "SEED=0__SWAP=false", "SEED=1__SWAP=true"):
        write_start(sweep / name, {"warmstart": "cache", "weights_sha256": a})
    write_start(sweep / "SEED=1__SWAP=false", {"warmstart": "cache", "weights_sha256": b})  # another build
    start = tmp_path / "warmstart_run"
    write_episodes(start, "final/eval", _episode_rows([0, 1, 1, 0]))
    write_start(start, {"weights_sha256": a})
    assert report_main([str(sweep), "--reference", str(start)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Starting policies"))
    assert line == (
        "Starting policies (weights digest, start.json): 3 cells from aaaaaaaaaaaa (the reference's); "
        "1 cells from bbbbbbbbbbbb; 2 cells recorded none. "
        "Cells that started from different policies compare warm starts as well as variants."
    )
    write_start(tmp_path / "other_run", {"weights_sha256": "c" * 64})
    write_episodes(tmp_path / "other_run", "final/eval", _episode_rows([0, 1, 1, 0]))
    for name in ("SEED=1__SWAP=false", "SEED=0__SWAP=control", "SEED=1__SWAP=control"):
        (sweep / name / "start.json").unlink(missing_ok=True)
        write_start(sweep / name, {"weights_sha256": a})
    assert report_main([str(sweep), "--reference", str(tmp_path / "other_run")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Starting policies"))
    assert (
        line
        == "Starting policies (weights digest, start.json): 6 cells from aaaaaaaaaaaa; the reference from cccccccccccc."
    )


# ------------------------------------------------------------------------- config fields in a sweep
TRAINING_PARAMETERS = """\
PRESET = "tiny"
VARIANT = "rspo"
SEED = 0
THREADS = None
RUN_DIR = ""
OVERRIDES = {}
"""

TRAINING_BODY = """\
import os
from rspo_kit.records import record
record({"preset": PRESET, "variant": VARIANT, "seed": SEED, "overrides": OVERRIDES, "threads": THREADS,
        "omp": os.environ.get("OMP_NUM_THREADS"), "final_success": 0.1 * SEED + OVERRIDES.get("algo.lr", 0)},
       RUN_DIR or None)
"""


def test_a_grid_of_config_fields_reaches_the_notebook_as_overrides(tmp_path, capsys):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(TRAINING_PARAMETERS)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(TRAINING_BODY)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "training.ipynb")
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "rspo_kit.experiments.sweep", str(tmp_path / "training.ipynb")]
    cmd += ["--preset", "alfworld-40k", "--out", str(out), "-p", "swap.sync_every", "2"]
    grid = {"algo.lr": [1e-4], "variant": ["plain", "rspo"], "seed": [1]}
    done = subprocess.run([*cmd, "--grid", json.dumps(grid)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = read_results(out / "algo.lr=0.0001__variant=rspo__seed=1.ipynb")
    assert (recorded["preset"], recorded["variant"], recorded["seed"]) == ("alfworld-40k", "rspo", 1)
    assert recorded["overrides"] == {"swap.sync_every": 2, "algo.lr": 1e-4}  # fixed ones, then the grid's
    assert recorded["threads"] == int(recorded["omp"]) == 1  # the protocol's one torch thread
    # read back under config names: the shorthand seed is train.seed
    table = aggregate(out)
    assert list(table["variant"]) == ["plain", "rspo"] and list(table["train.seed"]) == [1, 1]

    # a mistyped config field fails before any cell runs, naming it
    bad = [*cmd, "--grid", '{"algo.lrr": [1]}']
    done = subprocess.run(bad, capture_output=True, text=True, timeout=240)
    assert done.returncode == 2 and "'algo.lrr' is not a config field" in done.stderr
    with pytest.raises(SystemExit):  # an unknown preset, before any cell runs
        sweep_module.main([str(tmp_path / "training.ipynb"), "--grid", "{}", "--out", "x", "--preset", "no"])
    assert "is not a preset; choose one of alfworld-40k" in capsys.readouterr().err


def test_config_fields_need_a_notebook_that_takes_overrides(tiny_notebook, tmp_path):
    with pytest.raises(ValueError, match="OVERRIDES parameter"):
        run_sweep(tiny_notebook, {"algo.lr": [1e-4]}, tmp_path / "out", log=None)
    assert grid_module.notebook_parameters({"PRESET": "tiny", "algo": "ppo", "OVERRIDES": {"a.b": 1}}) == {
        "PRESET": "tiny",
        "ALGO": "ppo",
        "OVERRIDES": {"a.b": 1},
    }


def _archive(out: Path, keys: list[str], cells: dict[str, dict], results: dict[str, dict]) -> Path:
    """A committed archive: sweep.json and each finished cell's results.json, no notebooks."""
    out.mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"keys": keys, "cells": cells, "parameters": {"THREADS": 1}}))
    for name, values in results.items():
        (out / name).mkdir()
        (out / name / "results.json").write_text(json.dumps(values))
    return out


def test_archives_named_by_notebook_parameters_read_in_the_config_columns(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    # cells of a grid of notebook 04's UPPERCASE parameters: SWAP=false is plain, true is RSPO
    old = {
        f"ALGO=gigpo__SWAP={v}__SEED=0": {"ALGO": "gigpo", "SWAP": swap, "SEED": 0}
        for v, swap in (("false", False), ("true", True), ("control", "control"))
    }
    scores = {"false": 0.2, "true": 0.3, "control": 0.25}
    results = {n: {"final_eval_success": scores[n.split("SWAP=")[1].split("__")[0]]} for n in old}
    first = _archive(tmp_path / "old", ["ALGO", "SWAP", "SEED"], old, results)
    # and a sweep of config fields, seed 1
    new = {
        f"algo.name=gigpo__variant={v}__train.seed=1": {"algo.name": "gigpo", "variant": v, "train.seed": 1}
        for v in ("plain", "rspo", "control")
    }
    more = {n: {"final_eval_success": 0.1 + scores[s]} for n, s in zip(new, scores, strict=True)}
    second = _archive(tmp_path / "new", ["algo.name", "variant", "train.seed"], new, more)
    manifest, rows = aggregation_module.load_sweep(first)
    assert manifest["keys"] == ["algo.name", "variant", "train.seed"]
    assert [(r["algo.name"], r["variant"], r["train.seed"]) for r in rows] == [
        ("gigpo", "plain", 0),
        ("gigpo", "rspo", 0),
        ("gigpo", "control", 0),
    ]
    # pooled, one seed from each: the same groups
    pairs = ["--paired", "variant=rspo,plain", "--paired", "SWAP=true,false"]
    assert report_main([str(first), str(second), "--metrics", "final_eval_success", *pairs]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| variant | seeds | final_eval_success |"
    assert lines[2:5] == [
        "| plain | 0, 1 | 20.0 / 30.0 → 25.0 [-38.5, 88.5] |",
        "| rspo | 0, 1 | 30.0 / 40.0 → 35.0 [-28.5, 98.5] |",
        "| control | 0, 1 | 25.0 / 35.0 → 30.0 [-33.5, 93.5] |",
    ]
    paired = lines[lines.index("Paired by seed:") + 4 :][:2]  # the two names of one pair, one result
    assert paired == ["| variant=rspo − variant=plain | 0, 1 | +10.0 / +10.0 → +10.0 [+10.0, +10.0] |"] * 2


# ----------------------------------------------------------------------------------------- protocols
def test_protocol_presets_fix_their_env_and_start_from_the_committed_warm_start():
    from rspo_kit.paths import repository_path
    from rspo_kit.train.presets import preset
    from rspo_kit.train.setup import warmstart_recipe

    cfg = preset("alfworld-40k", algo="grpo", swap="rspo", seed=1)
    assert (cfg.env.name, cfg.algo.name, cfg.swap.mode, cfg.train.seed) == ("alfworld", "grpo", "rspo", 1)
    assert (cfg.algo.lr, cfg.env.max_steps, cfg.train.max_env_steps, cfg.policy.sft_updates) == (
        3e-5,
        30,
        40_000,
        1536,
    )
    assert (cfg.train.eval_split, cfg.train.eval_n, cfg.train.eval_every) == ("valid", 40, 5)
    assert cfg.train.final_eval_splits == ("eval", "eval_unseen") and cfg.train.final_eval_n == 120
    webshop = preset("webshop-7k")
    assert (webshop.env.name, webshop.algo.lr, webshop.env.max_steps) == ("webshop", 1e-4, 15)
    assert (webshop.reward.outcome_mode, webshop.swap.replay_filter) == ("score", "outcome_above_mean")
    assert webshop.train.max_env_steps == 7_000 and webshop.policy.sft_updates == 1284
    with pytest.raises(ValueError, match="fixes its env to 'alfworld'"):
        preset("alfworld-40k", env="webshop")
    assert preset("alfworld-40k", env="alfworld").env.name == "alfworld"
    assert (preset("tiny").env.name, preset("tiny", env="webshop").env.name) == ("alfworld", "webshop")
    # the committed warm start was built by the protocol's own recipe: installing it never fails on that
    for name in ("alfworld-40k", "webshop-7k"):
        cfg = preset(name)
        folder = repository_path(cfg.policy.warmstart_from)
        assert (folder / "config.json").is_file() and not Path(cfg.policy.warmstart_from).is_absolute()
        assert json.loads((folder.parent / "recipe.json").read_text()) == warmstart_recipe(cfg)


def test_a_run_with_warmstart_from_starts_from_those_weights(tmp_path, monkeypatch):
    import torch
    from lock_env import register_lock

    import rspo_kit.paths as paths_module
    import rspo_kit.train.setup as setup_module
    from rspo_kit.policy.models import weights_digest
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.sft import save_policy
    from rspo_kit.train.presets import preset

    register_lock()  # the "dial" env
    monkeypatch.setattr(setup_module, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setenv("RSPO_KIT_DATA", str(paths_module.data_dir()))
    monkeypatch.setattr(paths_module, "_CHECKOUT_DIR", tmp_path / "repo")  # relative paths start here
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "pyproject.toml").touch()
    cfg = preset("smoke", env="dial", policy__warmstart=True, policy__sft_updates=2)
    policy = Policy.load(cfg.policy.preset, seed=0)  # weights no SFT here would build
    with torch.no_grad():
        next(policy.model.parameters()).add_(0.5)
    save_policy(policy, tmp_path / "repo" / "saved" / "policy")
    expected = weights_digest(policy.model)

    cfg.override("policy.warmstart_from", "saved/policy")
    started, report = setup_module.initial_policy(cfg, progress_bar=False)
    assert weights_digest(started.model) == expected  # no SFT: the saved weights, installed
    assert report["cached"] is True and report["installed_from"] == "saved/policy"
    assert (tmp_path / "cache" / "warmstart").is_dir() and not list((tmp_path / "cache").rglob("*.partial*"))
    again, _ = setup_module.initial_policy(cfg, progress_bar=False)  # held already: the same weights
    assert weights_digest(again.model) == expected
    cfg.override("policy.warmstart_from", "nowhere/policy")
    with pytest.raises(FileNotFoundError, match="not a saved policy folder"):
        setup_module.initial_policy(cfg, progress_bar=False)


def test_the_reference_run_evaluates_the_starting_policy_once(tmp_path):
    from rspo_kit.records import load_episodes

    fixed = {"PRESET": "smoke", "THREADS": 1, "train.final_eval_split": "eval", "train.final_eval_n": 2}
    run = sweep_module.reference_run("smoke", tmp_path, fixed, log=None)
    assert run == tmp_path / sweep_module.REFERENCE_RUN
    episodes = load_episodes(run)
    assert set(episodes["evaluation"]) == {"final/eval"} and len(episodes) == 2
    config = json.loads((run / "config.json").read_text())
    assert config["train"]["iterations"] == 0 and config["train"]["final_eval_n"] == 2
    written = (run / "final_episodes.parquet").stat().st_mtime_ns
    sweep_module.reference_run("smoke", tmp_path, fixed, log=None)  # a sweep run again: kept as it is
    assert (run / "final_episodes.parquet").stat().st_mtime_ns == written
