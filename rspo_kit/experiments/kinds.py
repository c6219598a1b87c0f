"""Success by task kind: the kinds a warm start never saw against the kinds it was shown.

A warm start whose demonstrations left some task kinds out (``policy.sft_exclude_kinds``) fails every
group on them, so they are where RSPO's explorer has groups to rescue; the kinds it was shown are where
the regime is the ordinary one. ``kind_frame`` splits every final evaluation of a sweep's cells into
those two halves (one row per cell, evaluation and half), ``kind_summary`` averages each over the
seeds with a 95% t-interval, and ``kind_figure`` draws it (notebook 06). ``report --by-kind`` prints
the same split as tables (``rspo_kit.experiments.report.kind_table``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pandas as pd

from rspo_kit.experiments.report import KIND_HALVES
from rspo_kit.experiments.sweep import SEED_KEY, mean_ci

# what each half is called in tables and figures
HALF_LABELS = {KIND_HALVES[0]: "kinds left out", KIND_HALVES[1]: "kinds shown"}
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_REFERENCE_COLOR = "#7f7f7f"


def evaluation_label(evaluation: str) -> str:
    """A final evaluation's name as a reader says it.

    >>> evaluation_label("final/eval"), evaluation_label("final_sampled/eval_unseen")
    ('eval, greedy', 'eval_unseen, sampled')
    """
    mode, _, split = evaluation.partition("/")
    return f"{split}, {'sampled' if mode.endswith('sampled') else 'greedy'}"


def kind_halves(episodes: pd.DataFrame, left_out: Collection[str]) -> pd.DataFrame:
    """One run's episodes (``load_episodes``) per evaluation and half (the ``left_out`` kinds or the
    others): ``evaluation``, ``half``, ``won``, ``episodes``, ``success``, evaluations in their order.

    >>> ep = pd.DataFrame({"evaluation": ["final/eval"] * 3, "kind": ["a", "b", "a"], "won": [1, 1, 0]})
    >>> kind_halves(ep, ["b"])[["half", "won", "episodes", "success"]].values.tolist()
    [['sft_kinds', 1, 2, 0.5], ['left_out_kinds', 1, 1, 1.0]]
    """
    half = episodes["kind"].isin(list(left_out)).map({True: KIND_HALVES[0], False: KIND_HALVES[1]})
    counts = episodes.assign(half=half).groupby(["evaluation", "half"], sort=False)["won"]
    out = counts.agg(won="sum", episodes="size").reset_index()
    return out.assign(won=out["won"].astype(int), success=out["won"] / out["episodes"])


def kind_frame(
    table: pd.DataFrame,
    episodes: Mapping[str, pd.DataFrame],
    left_out: Collection[str],
    by: Sequence[str],
) -> pd.DataFrame:
    """One row per finished cell with final episodes, evaluation and half (``left_out`` kinds or the
    others): the cell's grid values ``by`` and seed, ``evaluation``, ``half``, ``won``, ``episodes``,
    ``success``. ``table``: one row per finished cell (``aggregate``); ``episodes``: ``cell_episodes``.

    >>> ep = pd.DataFrame({"evaluation": ["final/eval"] * 2, "kind": ["a", "b"], "won": [1, 0]})
    >>> table = pd.DataFrame({"cell": ["c0", "c1"], "variant": ["rspo", "plain"], "train.seed": [0, 0]})
    >>> kind_frame(table, {"c0": ep}, ["b"], ["variant"])[["variant", "half", "success"]].values.tolist()
    [['rspo', 'sft_kinds', 1.0], ['rspo', 'left_out_kinds', 0.0]]
    """
    if not left_out:
        raise ValueError("no task kind to split by: name the kinds the warm start left out")
    frames = []
    for row in table.to_dict("records"):
        if row["cell"] not in episodes:
            continue
        keys = {k: row[k] for k in [*by, SEED_KEY] if k in row}
        frames.append(kind_halves(episodes[row["cell"]], left_out).assign(**keys))
    columns = [k for k in [*by, SEED_KEY] if k in table]
    if not frames:
        return pd.DataFrame(columns=[*columns, "evaluation", "half", "won", "episodes", "success"])
    frame = pd.concat(frames, ignore_index=True)
    return frame[[*columns, "evaluation", "half", "won", "episodes", "success"]]


def kind_summary(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """``kind_frame`` averaged over the seeds: one row per group of ``by``, evaluation and half with
    ``seeds``, ``mean``, ``ci_low`` and ``ci_high`` (95% t-interval over the seeds; NaN for one seed) and
    ``values`` (each seed's success, in seed order).

    >>> frame = pd.DataFrame({"variant": ["rspo", "rspo"], "train.seed": [1, 0], "evaluation": ["final/eval"] * 2,
    ...                       "half": ["left_out_kinds"] * 2, "success": [0.2, 0.1]})
    >>> row = kind_summary(frame, ["variant"]).iloc[0]
    >>> int(row["seeds"]), round(float(row["mean"]), 3), row["values"]
    (2, 0.15, [0.1, 0.2])
    """
    by = [k for k in by if k in frame]
    keys = [*by, "evaluation", "half"]
    ordered = frame.sort_values(SEED_KEY, kind="stable") if SEED_KEY in frame else frame
    rows = []
    for key, part in ordered.groupby(keys, sort=False, dropna=False):
        values = part["success"].astype(float).tolist()
        mean, low, high = mean_ci(values)
        stats = {"seeds": len(values), "mean": mean, "ci_low": low, "ci_high": high, "values": values}
        rows.append(dict(zip(keys, key, strict=True)) | stats)
    summary = pd.DataFrame(rows, columns=[*keys, "seeds", "mean", "ci_low", "ci_high", "values"])
    # the kinds left out first, then evaluations in the order the runs recorded them, groups as they came
    evaluations = {e: i for i, e in enumerate(dict.fromkeys(frame["evaluation"]))}
    rank = summary["half"].map({h: i for i, h in enumerate(KIND_HALVES)}) * len(evaluations)
    rank = rank + summary["evaluation"].map(evaluations)
    return summary.iloc[rank.argsort(kind="stable")].reset_index(drop=True)


def _group_label(row: Mapping[str, Any], by: Sequence[str]) -> str:
    return " / ".join(str(row[k]) for k in by if k in row) or "all"


def _bar(name: str, x: list[str], y: list[float], panel: int, color: str, **extra: Any) -> dict:
    axes = {"xaxis": f"x{panel + 1}", "yaxis": f"y{panel + 1}"}
    trace = {"type": "bar", "name": name, "legendgroup": name, "showlegend": panel == 0, "x": x, "y": y}
    text = {"texttemplate": "%{y:.0%}", "textposition": "outside"}  # a 0% bar is still read
    return trace | {"marker": {"color": color}, **axes, **text, **extra}


def kind_figure(
    summary: pd.DataFrame,
    by: Sequence[str],
    reference: pd.DataFrame | None = None,
    title: str = "success by task kind: mean over seeds, 95% t-interval",
) -> dict:
    """A plotly figure spec (plain dict; ``plotly.graph_objects.Figure(spec)`` shows it): two panels,
    the kinds left out and the kinds shown, each a bar per group of ``by`` and final evaluation
    (``kind_summary``) with its interval over the seeds and each seed's value on hover. ``reference``:
    one run's ``kind_halves`` (e.g. the warm start's evaluation), drawn as a grey bar beside the groups."""
    by = [k for k in by if k in summary]
    records = summary.to_dict("records")
    data: list[dict] = []
    for panel, half in enumerate(KIND_HALVES):
        if reference is not None:
            part = reference[reference["half"] == half]
            x = [evaluation_label(e) for e in part["evaluation"]]
            data += (
                [_bar("warm start", x, part["success"].tolist(), panel, _REFERENCE_COLOR)] if len(x) else []
            )
        for g, group in enumerate(dict.fromkeys(_group_label(r, by) for r in records)):
            rows = [r for r in records if _group_label(r, by) == group and r["half"] == half]
            if not rows:
                continue
            one = [r["seeds"] < 2 for r in rows]  # a single seed has no interval
            error = {
                "type": "data",
                "visible": not all(one),
                "array": [0.0 if o else r["ci_high"] - r["mean"] for r, o in zip(rows, one, strict=True)],
                "arrayminus": [0.0 if o else r["mean"] - r["ci_low"] for r, o in zip(rows, one, strict=True)],
            }
            seeds = [", ".join(f"{v:.1%}" for v in r["values"]) for r in rows]
            hover = f"{group}<br>%{{x}}: %{{y:.1%}}<br>seeds: %{{customdata}}<extra></extra>"
            x = [evaluation_label(r["evaluation"]) for r in rows]
            color = _COLORS[g % len(_COLORS)]
            y = [r["mean"] for r in rows]
            data.append(_bar(group, x, y, panel, color, error_y=error, customdata=seeds, hovertemplate=hover))
    layout = {
        "title": {"text": title},
        "barmode": "group",
        "xaxis": {"domain": [0.0, 0.47], "title": {"text": HALF_LABELS[KIND_HALVES[0]]}},
        "xaxis2": {"domain": [0.53, 1.0], "title": {"text": HALF_LABELS[KIND_HALVES[1]]}},
        "yaxis": {"range": [0, 1], "tickformat": ".0%", "title": {"text": "success"}},
        "yaxis2": {"range": [0, 1], "tickformat": ".0%", "anchor": "x2", "matches": "y"},
        "legend": {"title": {"text": " / ".join(by) or "group"}},
    }
    return {"data": data, "layout": layout}


def kind_record(summary: pd.DataFrame, by: Sequence[str]) -> dict[str, dict[str, float]]:
    """The means of ``kind_summary`` keyed for a notebook's record: group -> "half evaluation" -> mean.

    >>> s = pd.DataFrame({"variant": ["plain"], "evaluation": ["final/eval"], "half": ["left_out_kinds"],
    ...                   "seeds": [1], "mean": [0.25], "ci_low": [float("nan")], "ci_high": [float("nan")]})
    >>> kind_record(s, ["variant"])
    {'plain': {'left_out_kinds final/eval': 0.25}}
    """
    by = [k for k in by if k in summary]
    out: dict[str, dict[str, float]] = {}
    for r in summary.to_dict("records"):
        out.setdefault(_group_label(r, by), {})[f"{r['half']} {r['evaluation']}"] = float(r["mean"])
    return out
