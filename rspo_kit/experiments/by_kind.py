"""Success by task kind: the kinds a warm start never saw against the kinds it was shown.

A warm start whose demonstrations left some task kinds out (``policy.sft_exclude_kinds``) fails every
group on them, so they are where RSPO's explorer has groups to rescue; the kinds it was shown are where
the regime is the ordinary one. ``kind_frame`` splits every final evaluation of a sweep's cells into
those two halves (one row per cell, evaluation and half), ``kind_summary`` averages each over the
seeds with a 95% t-interval, and ``kind_figure`` draws it (notebook 06). ``report --by-kind`` prints
the same split as tables (``kind_table``), by the kinds the cells' warm start left out
(``left_out_kinds``: ``policy.sft_exclude_kinds`` as they ran with it) unless it is given others.

Why a half stays at 0% shows in the training rollouts (``rollout_kinds``, from a run's turn tables):
how many of the actor's and the explorer's episodes on the kinds left out were won, and how far they got.
An explorer that never wins there has no success to replay into the actor's all-failure groups.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rspo_kit.experiments.aggregation import load_sweep
from rspo_kit.experiments.figures import GROUP_COLORS
from rspo_kit.experiments.grid import SEED_KEY
from rspo_kit.experiments.intervals import mean_ci
from rspo_kit.experiments.pooling import notebook_defaults, preset_fields
from rspo_kit.experiments.tables import cells_frame
from rspo_kit.records import load_turns

# the two halves of an evaluation, and what each is called in figures
KIND_HALVES = ("left_out_kinds", "sft_kinds")
HALF_LABELS = {KIND_HALVES[0]: "kinds left out", KIND_HALVES[1]: "kinds shown"}
_REFERENCE_COLOR = "#7f7f7f"
# the field that names the task kinds a warm start never saw
EXCLUDE_FIELD = "policy.sft_exclude_kinds"


def half_of(kinds: pd.Series, left_out: Collection[str]) -> pd.Series:
    """Each task kind's half: ``left_out_kinds`` for the kinds in ``left_out``, else ``sft_kinds``."""
    return kinds.isin(list(left_out)).map({True: KIND_HALVES[0], False: KIND_HALVES[1]})


def split_by_kind(episodes: pd.DataFrame, left_out: Collection[str]) -> pd.DataFrame:
    """``episodes`` (``load_episodes``) with every evaluation split in two by task kind:
    ``final/eval:left_out_kinds`` holds the episodes of the kinds in ``left_out``, ``final/eval:sft_kinds``
    the others; evaluations in order, each half after its evaluation's left-out one.

    >>> ep = pd.DataFrame({"evaluation": ["final/eval"] * 3, "kind": ["a", "b", "a"], "won": [1, 0, 0]})
    >>> split_by_kind(ep, ["b"])["evaluation"].tolist()
    ['final/eval:left_out_kinds', 'final/eval:sft_kinds', 'final/eval:sft_kinds']
    """
    split = episodes.assign(evaluation=episodes["evaluation"] + ":" + half_of(episodes["kind"], left_out))
    return split.sort_values("evaluation", kind="stable", ignore_index=True)


def kind_metric(evaluation: str) -> str:
    """The column name of a split evaluation's success, as the cells' own final metrics are named.

    >>> kind_metric("final_sampled/eval_unseen:left_out_kinds")
    'final_sampled_eval_unseen_left_out_kinds_success'
    """
    return evaluation.replace("/", "_").replace(":", "_") + "_success"


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
    counts = episodes.assign(half=half_of(episodes["kind"], left_out)).groupby(
        ["evaluation", "half"], sort=False
    )["won"]
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
            color = GROUP_COLORS[g % len(GROUP_COLORS)]
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


def subgoal_share(progress: str) -> float:
    """The share of its subgoals an episode had done at a turn (a turn table's ``progress``, JSON),
    NaN where the env's progress names no ``subgoals_done`` and ``subgoals_total``.

    >>> subgoal_share('{"subgoals_done": 1, "subgoals_total": 4}'), subgoal_share('{"visited": 3}')
    (0.25, nan)
    """
    fields = json.loads(progress)
    if "subgoals_done" not in fields or "subgoals_total" not in fields:
        return math.nan
    return fields["subgoals_done"] / max(fields["subgoals_total"], 1)


ROLLOUT_COLUMNS = ("role", "half", "episodes", "won", "success", "subgoals_reached")


def rollout_kinds(turns: pd.DataFrame, left_out: Collection[str]) -> pd.DataFrame:
    """One run's training rollouts (``load_turns``) per role (actor, explorer, replay) and half (the
    ``left_out`` kinds or the others): ``episodes``, ``won``, ``success`` and ``subgoals_reached``, the
    mean over episodes of the largest share of subgoals an episode had done (``subgoal_share``).

    >>> turns = pd.DataFrame({"iteration": 1, "role": "actor", "group_id": [0, 0, 1], "traj_id": [0, 0, 1],
    ...     "kind": ["a", "a", "b"], "won": [False, False, True], "progress": [
    ...     '{"subgoals_done": 1, "subgoals_total": 2}', '{"subgoals_done": 0, "subgoals_total": 2}',
    ...     '{"subgoals_done": 2, "subgoals_total": 2}']})
    >>> rollout_kinds(turns, ["a"]).values.tolist()
    [['actor', 'left_out_kinds', 1, 0, 0.0, 0.5], ['actor', 'sft_kinds', 1, 1, 1.0, 1.0]]
    """
    steps = turns.assign(
        half=half_of(turns["kind"], left_out),
        share=turns["progress"].map(subgoal_share),
    )
    episodes = steps.groupby(["role", "half", "iteration", "group_id", "traj_id"], sort=False).agg(
        won=("won", "first"), share=("share", "max")
    )
    out = episodes.groupby(["role", "half"]).agg(
        episodes=("won", "size"), won=("won", "sum"), subgoals_reached=("share", "mean")
    )
    out = out.reset_index().assign(won=lambda f: f["won"].astype(int))
    out["success"] = out["won"] / out["episodes"]
    return out[list(ROLLOUT_COLUMNS)]


def rollout_kind_table(
    table: pd.DataFrame, folders: Mapping[str, Path], left_out: Collection[str], by: Sequence[str]
) -> pd.DataFrame:
    """``rollout_kinds`` of every finished cell of ``table`` whose run folder (``folders``) kept its
    turn tables (a live sweep folder; archives keep none), with the cell's grid values ``by`` and seed."""
    frames = []
    for row in table.to_dict("records"):
        folder = folders.get(row["cell"])
        if folder is None or not (Path(folder) / "turns").is_dir():
            continue
        keys = {k: row[k] for k in [*by, SEED_KEY] if k in row}
        frames.append(rollout_kinds(load_turns(folder), left_out).assign(**keys))
    columns = [*(k for k in [*by, SEED_KEY] if k in table), *ROLLOUT_COLUMNS]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def rollout_markdown(frame: pd.DataFrame) -> str:
    """``rollout_kind_table`` as Markdown: success and subgoals reached in percent.

    >>> print(rollout_markdown(pd.DataFrame([{"role": "actor", "half": "sft_kinds", "episodes": 8, "won": 2,
    ...                                        "success": 0.25, "subgoals_reached": float("nan")}])))
    | role | half | episodes | won | success | subgoals_reached |
    |---|---|---|---|---|---|
    | actor | sft_kinds | 8 | 2 | 25.0 | — |
    """

    def text(column: str, value: Any) -> str:
        if column in ("success", "subgoals_reached"):
            return "—" if pd.isna(value) else f"{100 * value:.1f}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.to_dict("records"):
        lines.append("| " + " | ".join(text(c, v) for c, v in row.items()) + " |")
    return "\n".join(lines)


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


def kind_table(table: pd.DataFrame, episodes: Mapping[str, pd.DataFrame], by: Sequence[str]) -> pd.DataFrame:
    """One row per finished cell with episodes (already ``split_by_kind``): its grid values and the
    success of each half of each final evaluation (``kind_metric`` columns), for ``markdown_table``."""
    rows = []
    for row in table.to_dict("records"):
        if row["cell"] not in episodes:
            continue
        success = episodes[row["cell"]].groupby("evaluation", sort=False)["won"].mean()
        keys = {k: row[k] for k in [*by, SEED_KEY] if k in row}
        rows.append(keys | {kind_metric(e): float(v) for e, v in success.items()})
    return cells_frame(rows, by)


def left_out_kinds(out_dirs: Sequence[str | Path], manifest: Mapping) -> tuple[str, ...]:
    """The task kinds the warm start of a sweep's cells left out (``policy.sft_exclude_kinds`` as they
    ran with it: a grid key, a fixed parameter, else their preset's), ``()`` where it left none out. A
    ValueError where the cells differ in it: then name the kinds (``--by-kind KIND,KIND``)."""
    if EXCLUDE_FIELD in manifest["keys"]:
        values = {tuple(kind_names(c.get(EXCLUDE_FIELD))) for c in manifest["cells"].values()}
    else:
        values = {tuple(kind_names(_ran_with_field(d, EXCLUDE_FIELD))) for d in out_dirs}
    if len(values) > 1:
        shown = " vs ".join(", ".join(v) or "none" for v in sorted(values))
        raise ValueError(
            f"the cells left out different kinds ({EXCLUDE_FIELD}: {shown}); name the kinds: --by-kind KIND,KIND"
        )
    return values.pop() if values else ()


def sweep_left_out_kinds(out_dirs: Sequence[str | Path], manifest: Mapping) -> tuple[str, ...]:
    """``left_out_kinds``, and a ValueError where the cells' warm start left none out."""
    kinds = left_out_kinds(out_dirs, manifest)
    if not kinds:
        raise ValueError(
            f"the cells' warm start left no task kind out ({EXCLUDE_FIELD} is empty); name the kinds to "
            "split by: --by-kind KIND,KIND"
        )
    return kinds


def kind_names(value: Any) -> list[str]:
    """Task kinds as a config holds them (a tuple), a parameter (text, comma-separated) or JSON (a list)."""
    names = value.split(",") if isinstance(value, str) else list(value or ())
    return sorted(n.strip() for n in names if n.strip())


def _ran_with_field(out_dir: str | Path, dotted: str) -> Any:
    """The value of config field ``dotted`` that a sweep folder's cells ran with where its grid does
    not vary it: its fixed parameter, else its preset's (``preset_fields``), else None."""
    manifest, _ = load_sweep(out_dir)
    defaults = notebook_defaults(manifest.get("notebook"))
    parameters = {k: defaults.get(k) for k in ("PRESET", "env.name")} | manifest.get("parameters", {})
    return preset_fields(parameters).get(dotted, parameters.get(dotted))
