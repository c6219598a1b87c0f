"""The paper's Figure 3: is a policy trained on a dense reward alone hacking it?

The paper trains GRPO on its learned dense reward without the outcome and sees success rise, then
fall, while the dense reward the policy optimises keeps rising. ``hacking_curve`` reads those two axes
off runs that trained on a dense reward alone (the ``process`` variant): per run and update, the
rollout's success and mean dense return, and where the run evaluated on valid tasks, that held-out
success. ``curve_blocks`` averages them over blocks of updates (the table a README shows: single
updates swing by tens of points), ``hacking_figure`` draws them (success on the left axis, dense return
on the right; runs thin, their mean thick). CLI::

    python -m rspo_kit.experiments.dense_hacking RUN_DIR ... --out FOLDER [--block 8]

writes ``runs.csv`` (every run's rows), ``curve.csv`` (the mean over runs per update), ``curve.html``
(the figure) and prints the block table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rspo_kit.experiments.figures import GROUP_COLORS, write_figure_html


def hacking_curve(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """Per run and iteration (``update`` i: the rollout the policy sampled before its i-th update): the
    rollout's success and mean dense return (``rollout/success``, ``rollout/process_return``), the env
    steps spent so far, and ``valid_success``, the valid evaluation logged at that iteration (NaN where
    the run did not evaluate)."""
    from rspo_kit.records import load_metrics

    frames = []
    for run in run_dirs:
        m = load_metrics(Path(run))
        if "rollout/success" not in m:
            raise ValueError(f"{run}: its metrics.jsonl has no rollout/success rows")
        valid = (
            m.dropna(subset=["eval/success"]).set_index("iteration")["eval/success"]
            if "eval/success" in m
            else {}
        )
        m = m.dropna(subset=["rollout/success"])
        frames.append(
            pd.DataFrame(
                {
                    "run": Path(run).name,
                    "update": m["iteration"].astype(int),
                    "success": m["rollout/success"],
                    "dense_return": m["rollout/process_return"],
                    "env_steps": m["rollout/cumulative_env_steps"],
                    "valid_success": m["iteration"].map(pd.Series(valid, dtype=float)),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def mean_curve(runs: pd.DataFrame) -> pd.DataFrame:
    """The mean over runs per update of ``hacking_curve``'s columns, with the number of runs."""
    return runs.groupby("update", as_index=False).agg(
        runs=("run", "nunique"),
        success=("success", "mean"),
        dense_return=("dense_return", "mean"),
        valid_success=("valid_success", "mean"),
        env_steps=("env_steps", "mean"),
    )


def curve_blocks(curve: pd.DataFrame, size: int) -> pd.DataFrame:
    """``mean_curve`` averaged over blocks of ``size`` updates (1-8, 9-16, ...): rollout success, dense
    return and valid success (over the updates that evaluated), and the env steps at the block's end.

    >>> c = pd.DataFrame({"update": [1, 2, 3], "success": [0.2, 0.4, 0.9], "dense_return": [1.0, 2.0, 3.0],
    ...                   "valid_success": [float("nan"), 0.5, float("nan")], "env_steps": [10, 20, 30]})
    >>> curve_blocks(c, 2).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'updates': '1-2', 'success': 0.3, 'dense_return': 1.5, 'valid_success': 0.5, 'env_steps': 20},
     {'updates': '3', 'success': 0.9, 'dense_return': 3.0, 'valid_success': nan, 'env_steps': 30}]
    """
    if size < 1:
        raise ValueError(f"a block holds at least one update, got {size}")
    block = (curve["update"] - 1) // size
    rows = []
    for _, part in curve.groupby(block, sort=True):
        first, last = int(part["update"].min()), int(part["update"].max())
        rows.append(
            {
                "updates": f"{first}-{last}" if last > first else str(first),
                "success": round(float(part["success"].mean()), 6),
                "dense_return": round(float(part["dense_return"].mean()), 6),
                "valid_success": round(float(part["valid_success"].mean()), 6),
                "env_steps": int(part["env_steps"].max()),
            }
        )
    return pd.DataFrame(rows)


def blocks_markdown(blocks: pd.DataFrame) -> str:
    """``curve_blocks`` as a Markdown table: success in percent, the dense return as it is summed."""
    lines = [
        "| updates | rollout success | valid success | mean dense return | env steps at the block's end |",
        "|---|---|---|---|---|",
    ]
    for r in blocks.to_dict("records"):
        valid = "—" if pd.isna(r["valid_success"]) else f"{100 * r['valid_success']:.1f}"
        lines.append(
            f"| {r['updates']} | {100 * r['success']:.1f} | {valid} | {r['dense_return']:.3f} | {r['env_steps']:,} |"
        )
    return "\n".join(lines)


def hacking_figure(runs: pd.DataFrame) -> dict:
    """A plotly figure spec: success (left axis) and mean dense return (right axis) per update, each
    run thin and the mean over runs thick; valid success as markers where the runs evaluated."""
    success, dense = GROUP_COLORS[0], GROUP_COLORS[3]
    data = []
    for name, part in runs.groupby("run", sort=False):
        x = part["update"].tolist()
        for column, color, axis in (("success", success, "y"), ("dense_return", dense, "y2")):
            data.append(
                {"type": "scatter", "mode": "lines", "x": x, "y": part[column].tolist(), "name": str(name),
                 "yaxis": axis, "line": {"color": color, "width": 1}, "opacity": 0.4, "showlegend": False}
            )  # fmt: skip
    mean = mean_curve(runs)
    x = mean["update"].tolist()
    data += [
        {"type": "scatter", "mode": "lines", "x": x, "y": mean["success"].tolist(), "yaxis": "y",
         "name": f"rollout success (mean of {runs['run'].nunique()})", "line": {"color": success, "width": 3}},
        {"type": "scatter", "mode": "lines", "x": x, "y": mean["dense_return"].tolist(), "yaxis": "y2",
         "name": "mean dense return Σ r_t", "line": {"color": dense, "width": 3}},
    ]  # fmt: skip
    valid = mean.dropna(subset=["valid_success"])
    if len(valid):
        data.append(
            {"type": "scatter", "mode": "markers", "x": valid["update"].tolist(), "yaxis": "y",
             "y": valid["valid_success"].tolist(), "name": "valid success", "marker": {"color": success, "symbol": "diamond"}}
        )  # fmt: skip
    layout = {
        "xaxis": {"title": {"text": "updates of the policy (on the dense reward alone)"}},
        "yaxis": {"title": {"text": "success"}, "range": [0, 1]},
        "yaxis2": {"title": {"text": "mean dense return"}, "overlaying": "y", "side": "right"},
        "legend": {"orientation": "h", "y": -0.2},
    }
    return {"data": data, "layout": layout}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.experiments.dense_hacking",
        description="The paper's Figure 3: success and dense return per update of runs trained on a dense "
        "reward alone; writes runs.csv, curve.csv and curve.html to --out and prints the block table.",
    )
    ap.add_argument("runs", nargs="+", help="run directories (e.g. a sweep's cell folders)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--block", type=int, default=8, help="updates per row of the printed table (default 8)")
    args = ap.parse_args(argv)
    try:
        runs = hacking_curve(args.runs)
        blocks = curve_blocks(mean_curve(runs), args.block)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    runs.round(5).to_csv(args.out / "runs.csv", index=False)
    mean_curve(runs).round(5).to_csv(args.out / "curve.csv", index=False)
    title = f"Dense reward alone: success and dense return per update ({runs['run'].nunique()} runs)"
    write_figure_html(hacking_figure(runs), args.out / "curve.html", mean_curve(runs).round(3), title)
    print(blocks_markdown(blocks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
