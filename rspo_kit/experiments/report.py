"""A sweep's results as a Markdown table, e.g. for the README: ``python -m rspo_kit.experiments.report OUT``.

One row per group (the grid values without the seed), one column per metric: every seed's value in
seed order, then the mean and its 95% t-interval over the seeds, e.g. ``20.0 / 15.8 / 25.0 → 20.3
[8.9, 31.7]``. Success rates, scores, shares and rates are shown in percent (WebShop's scores are
points, 0-100, and shown as such). Cells that have not finished are left out and listed under the
table with where their runs stand, so a sweep still running can be reported as it stands.
``--statistics`` adds a second table of the same shape, read from each finished cell's
``metrics.jsonl``: how the run spent its budget and what the swap did (``run_statistics``) — what to
look at first when a variant loses — and a third of the same for the cells still running, as far as
they got (to tune on, e.g. the explorer's edge over the actor).
``--paired variant=rspo,plain`` adds the differences between two values of a grid key seed by seed
(cells that share a seed share their warm start and task draws, so the paired interval is the one
to read when two variants are close), e.g. RSPO − plain and RSPO − control; cells told apart by
several keys pair the same way (``--paired 'variant=control&swap.replay_ratio=0.0,variant=plain'``:
an ablation in a second folder − plain). Keys are config fields as ``load_sweep`` names them
(``config_key``: ``SWAP=true,false`` of archived grids reads as ``variant=rspo,plain``). Where the cells
recorded their final evaluations' episodes (``final_episodes.parquet``), it adds the same
differences task by task (``task_paired_table``): each task's difference averaged over the seeds,
and a 95% interval over the tasks. That interval is about these trained runs on these tasks; the
seed-by-seed one is the one about the algorithm. ``--reference RUN_DIR`` compares every group with
one run the same way (``reference_table``), e.g. with the warm start (``sweep --reference-run``
evaluates it into ``OUT/warmstart_run``): did training move the runs past where they started?
Several folders are read as one sweep (``report OUT OUT2``): seeds or a new knob added later, in a
second folder with a later checkout (``pooled_sweep``); ``--curves PAGE`` draws their learning curves
together (``curves_page``). ``--by-kind`` splits every final evaluation in two by task kind: the kinds
the warm start's demonstrations left out (``policy.sft_exclude_kinds``, or the kinds named) and the
kinds they showed (``split_by_kind``): a table of each half's success seed by seed (``kind_table``),
the task-by-task tables per half, and, where the cells kept their turn tables (a live sweep folder), the
training rollouts' success per role and half (``rollout_kind_table``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from rspo_kit.experiments.kinds import kind_metric, rollout_kind_table, rollout_markdown, split_by_kind
from rspo_kit.experiments.sweep import (
    CURVE_AXES,
    CURVE_X,
    SEED_KEY,
    CellOutcome,
    cell_progress,
    config_key,
    config_params,
    curve_figure,
    load_sweep,
    mean_ci,
    parse_value,
    summarize,
    write_aggregate,
    write_figure_html,
)
from rspo_kit.records import load_episodes, load_metrics, read_json, read_start

# what to report when no metrics are named: the protocols' test splits, else the last evaluation
DEFAULT_METRICS = ("final_eval_success", "final_eval_unseen_success")
FALLBACK_METRICS = ("final_success",)
PERCENT_SUFFIXES = ("success", "score", "outcome", "ci_low", "ci_high", "share", "rate")


# how a column's values are written: fractions in percent, WebShop's scores in their points, counts
Unit = Literal["percent", "points", "number"]


def value_text(value: float, unit: Unit, signed: bool = False) -> str:
    """One value in its unit: fractions in percent, score points to one decimal; — for a missing one."""
    if value is None or not math.isfinite(value):
        return "—"
    sign = "+" if signed else ""
    return {"percent": f"{100 * value:{sign}.1f}", "points": f"{value:{sign}.1f}"}.get(
        unit, f"{value:{sign}.3g}"
    )


def cell_text(values: Sequence[float], unit: Unit, signed: bool = False) -> str:
    """Every replicate, then mean [95% t-interval]; one replicate alone has no interval. ``signed``:
    a + on positive values (differences).

    >>> cell_text([0.2, 0.15, 0.25], "percent")
    '20.0 / 15.0 / 25.0 → 20.0 [7.6, 32.4]'
    >>> cell_text([0.2], "percent"), cell_text([45.25], "points"), cell_text([33.0], "number")
    ('20.0', '45.2', '33')
    >>> cell_text([math.nan, math.nan], "number")  # e.g. a swap statistic of plain runs
    '—'
    """
    if not any(v is not None and math.isfinite(v) for v in values):
        return "—"
    shown = " / ".join(value_text(v, unit, signed) for v in values)
    if len(values) < 2:
        return shown
    mean, low, high = mean_ci(values)
    return f"{shown} → {value_text(mean, unit, signed)} [{value_text(low, unit, signed)}, {value_text(high, unit, signed)}]"


def unit_of(metric: str, values: pd.Series) -> Unit:
    """How a column is shown: rates and shares in percent; scores in the env's own units, which are
    a fraction for ALFWorld (its success) and points (0-100) for WebShop, so a score column with a
    value above 1 is in points.

    >>> unit_of("final_eval_score", pd.Series([0.25, 0.5])), unit_of("final_eval_score", pd.Series([45.3]))
    ('percent', 'points')
    >>> unit_of("final_eval_success", pd.Series([0.25])), unit_of("actor_updates", pd.Series([33.0]))
    ('percent', 'number')
    """
    if not metric.endswith(PERCENT_SUFFIXES):
        return "number"
    in_points = metric.endswith("score") and bool((pd.to_numeric(values, errors="coerce") > 1).any())
    return "points" if in_points else "percent"


def markdown_table(table: pd.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> str:
    """Groups of ``table`` (one row per finished cell) by ``by``, replicates in seed order."""
    missing = [m for m in metrics if m not in table]
    if missing:
        raise ValueError(f"no recorded metric {missing}; the cells recorded {sorted(table.columns)}")
    order = [SEED_KEY] if SEED_KEY in table else []
    header = [*by, "seeds", *metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    table = table.sort_values(order, kind="stable")  # seeds in order; groups in the order of the rows
    units = {m: unit_of(m, table[m]) for m in metrics}  # one unit per column, over all its groups
    groups = table.groupby(list(by), sort=False, dropna=False) if by else [((), table)]
    for _, part in groups:
        key = _group_values(part, by)
        seeds = ", ".join(str(s) for s in part[SEED_KEY]) if SEED_KEY in part else str(len(part))
        cells = [cell_text(part[m].tolist(), units[m]) for m in metrics]
        lines.append("| " + " | ".join([*map(_label, key), seeds, *cells]) + " |")
    return "\n".join(lines)


def _label(value: object) -> str:
    """A grid value in a table cell; an empty string shows as "" rather than an empty cell.

    >>> _label(True), _label(None), _label(""), _label("none")
    ('True', 'None', '""', 'none')
    """
    return '""' if value == "" else str(value)


def _group_values(part: pd.DataFrame, by: Sequence[str]) -> tuple:
    """A group's values of ``by`` as the cells have them (pandas names a group of None values NaN)."""
    return tuple(part[k].iloc[0] for k in by)


def _frame(rows: Sequence[Mapping], keys: Sequence[str]) -> pd.DataFrame:
    """Rows as a table whose grid-key columns keep the cells' values (None stays None, not NaN)."""
    table = pd.DataFrame(list(rows))
    for k in keys:
        if k in table:
            table[k] = pd.Series([r.get(k) for r in rows], index=table.index, dtype=object)
    return table


# a pair of variants to difference: (KEY, A, B) for two values of one key, or ({KEY: A, ...},
# {KEY: B, ...}) for cells told apart by several keys (e.g. the control with its replay off − plain)
Pair = tuple[str, object, object] | tuple[Mapping[str, object], Mapping[str, object]]


def parse_pair(text: str) -> Pair:
    """``"KEY=A,B"`` to ``(KEY, A, B)``; ``"K=A&L=C,K=B"`` to ``({K: A, L: C}, {K: B})`` (values as
    in a grid, read by ``parse_value``).

    Keys and values are read as ``load_sweep`` names them (``config_key``).

    >>> parse_pair("variant=rspo,control")
    ('variant', 'rspo', 'control')
    >>> parse_pair("SWAP=true,false")
    ('variant', 'rspo', 'plain')
    >>> parse_pair('variant=control&swap.replay_ratio=0.0,variant=plain')
    ({'variant': 'control', 'swap.replay_ratio': 0.0}, {'variant': 'plain'})
    """
    key, sep, values = text.partition("=")
    parts = values.split(",")
    if sep and key and len(parts) == 2 and all(parts) and "=" not in parts[1] and "&" not in values:
        (name, a), (_, b) = (config_key(key, parse_value(v)) for v in parts)
        return name, a, b
    sides = text.split(",")
    terms = [[t.partition("=") for t in side.split("&")] for side in sides]
    if len(sides) != 2 or not all(k and sep and v for side in terms for k, sep, v in side):
        raise ValueError(f"--paired takes KEY=A,B (e.g. variant=rspo,plain) or K=A&L=C,K=B, got {text!r}")
    a, b = (dict(config_key(k, parse_value(v)) for k, _, v in side) for side in terms)
    return a, b


def _sides(pair: Pair) -> tuple[dict[str, object], dict[str, object]]:
    """A pair as the grid values that select its two sides: ``({key: a}, {key: b})``."""
    if len(pair) == 3:
        key, a, b = pair
        return {key: a}, {key: b}
    return dict(pair[0]), dict(pair[1])


def pair_keys(pair: Pair) -> list[str]:
    """The grid keys a pair's sides differ in or select by (not to group by), in order."""
    a, b = _sides(pair)
    return [*a, *(k for k in b if k not in a)]


def _pair_label(pair: Pair) -> str:
    """``KEY=a − KEY=b``; for several keys ``K=a, L=c − K=b``; values as ``--paired`` takes them (a
    string in quotes only where it would read as another value).

    >>> _pair_label(("variant", "rspo", "plain")), _pair_label(({"K": "true", "L": 0.0}, {"K": None}))
    ('variant=rspo − variant=plain', 'K="true", L=0.0 − K=null')
    """

    def shown(v: object) -> str:
        return v if isinstance(v, str) and parse_value(v) == v else json.dumps(v)

    return " − ".join(", ".join(f"{k}={shown(v)}" for k, v in side.items()) for side in _sides(pair))


def _pair_cells(part: pd.DataFrame, side: Mapping[str, object]) -> pd.DataFrame:
    """The rows of ``part`` whose grid values are ``side``'s (True is not 1, "true" is not True)."""
    keep = pd.Series(True, index=part.index)
    for key, value in side.items():
        keep &= part[key].map(lambda v, value=value: v == value and type(v) is type(value))
    return part[keep]


def _check_keys(table: pd.DataFrame, pair: Pair) -> None:
    for key in pair_keys(pair):
        if key not in table:
            raise ValueError(f"no grid key {key!r}; the cells have {sorted(table.columns)}")


def paired_table(
    table: pd.DataFrame,
    pairs: Sequence[Pair],
    by: Sequence[str],
    metrics: Sequence[str],
) -> str:
    """For each pair (``(key, a, b)`` or ``({key: a, ...}, {key: b, ...})``) and group of ``by``:
    ``a − b`` of every metric seed by seed (seeds where both finished), then the mean difference
    and its 95% t-interval; rates in percentage points, scores in their units. A group where no
    seed finished both is left out."""
    if SEED_KEY not in table:
        raise ValueError(f"paired differences need the grid key {SEED_KEY!r}")
    header = [*by, "difference", "seeds", *metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    units = {m: unit_of(m, table[m]) for m in metrics}
    for pair in pairs:
        _check_keys(table, pair)
        label = _pair_label(pair)
        groups = table.groupby(list(by), sort=False, dropna=False) if by else [((), table)]
        for _, part in groups:
            group = _group_values(part, by)
            first, second = (_pair_cells(part, side).set_index(SEED_KEY) for side in _sides(pair))
            if not (first.index.is_unique and second.index.is_unique):
                raise ValueError(
                    f"{label}: several cells of {dict(zip(by, group, strict=True))} share a seed; "
                    f"group by the keys that tell them apart (by={list(by)})"
                )
            seeds = sorted(set(first.index) & set(second.index))
            if not seeds:
                continue
            cells = [
                cell_text([first.at[s, m] - second.at[s, m] for s in seeds], units[m], signed=True)
                for m in metrics
            ]
            lines.append(
                "| " + " | ".join([*map(_label, group), label, ", ".join(map(str, seeds)), *cells]) + " |"
            )
    return "\n".join(lines)


def _task_rows(joined: pd.DataFrame) -> list[list[str]]:
    """Per evaluation of ``joined`` (episodes of two runs merged on evaluation, task and sample, with
    ``won_a/_b`` and ``score_a/_b``): the evaluation, ``tasks``, ``episodes won only by a / b`` and
    the success difference, then the score's where either run's score is not its success."""
    rows = []
    for evaluation, ep in joined.groupby("evaluation", sort=False):
        won = ep["won_a"].astype(float) - ep["won_b"].astype(float)
        score = ep["score_a"].astype(float) - ep["score_b"].astype(float)
        per_task = pd.DataFrame({"task": ep["task_id"], "won": won, "score": score}).groupby("task").mean()
        cells = [str(evaluation), str(len(per_task)), f"{int((won > 0).sum())} / {int((won < 0).sum())}"]
        cells.append(_difference(per_task["won"], "percent"))
        if not ((ep["score_a"] == ep["won_a"]) & (ep["score_b"] == ep["won_b"])).all():  # a score of its own
            unit = unit_of("score", pd.concat([ep["score_a"], ep["score_b"]]))
            cells.append(_difference(per_task["score"], unit))
        rows.append(cells)
    return rows


def _task_lines(header: list[str], rows: list[list[str]]) -> str:
    """The Markdown table of ``header`` and ``rows``: a ``score`` column is added where a row is one
    cell longer than the header (``_task_rows`` gave it a score), ``—`` in the rows without."""
    if any(len(r) > len(header) for r in rows):
        header = [*header, "score"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r + ["—"] * (len(header) - len(r))) + " |" for r in rows]
    return "\n".join(lines)


def task_paired_table(
    table: pd.DataFrame,
    episodes: Mapping[str, pd.DataFrame],
    pairs: Sequence[Pair],
    by: Sequence[str],
) -> str:
    """For each pair (as ``paired_table``), group of ``by`` and final evaluation: ``a − b`` task by task.

    ``table`` has one row per finished cell (its ``cell`` name, grid keys and seed); ``episodes``
    maps a cell to its ``load_episodes`` frame (cells without one are left out). Episodes pair by
    seed, task and sample, as two cells of one seed evaluate the same tasks with the same seed.
    Per evaluation: the tasks, the episodes only ``a`` won and only ``b`` won, and the success
    difference (and the score's, where the score is not the success) in percentage points: the mean
    over tasks of each task's mean difference over seeds and samples, with a 95% t-interval over
    the tasks.
    """
    rows: list[list[str]] = []
    for pair in pairs:
        _check_keys(table, pair)
        label = _pair_label(pair)
        groups = table.groupby(list(by), sort=False, dropna=False) if by else [((), table)]
        for _, part in groups:
            group = _group_values(part, by)
            first, second = (_pair_cells(part, side).set_index(SEED_KEY)["cell"] for side in _sides(pair))
            seeds = sorted(
                s
                for s in set(first.index) & set(second.index)
                if first[s] in episodes and second[s] in episodes
            )
            if not seeds:
                continue
            joined = pd.concat(
                [
                    episodes[first[s]]
                    .merge(episodes[second[s]], on=["evaluation", "task_id", "sample"], suffixes=("_a", "_b"))
                    .assign(seed=s)
                    for s in seeds
                ],
                ignore_index=True,
            )
            head = [*map(_label, group), label, ", ".join(map(str, seeds))]
            rows += [head + cells for cells in _task_rows(joined)]
    columns = ["evaluation", "tasks", "episodes won only by a / b", "success"]
    return _task_lines([*by, "difference", "seeds", *columns], rows)


def reference_table(
    table: pd.DataFrame,
    episodes: Mapping[str, pd.DataFrame],
    reference: pd.DataFrame,
    by: Sequence[str],
) -> str:
    """Each group of ``by`` − one reference run (e.g. the sweep's warm start), task by task.

    ``reference`` is that run's ``load_episodes`` frame; every finished cell with episodes is
    merged with it on evaluation, task and sample (evaluations the reference lacks are left out).
    Per group and evaluation, as ``task_paired_table``: the tasks, the episodes only the cells won /
    only the reference won (summed over seeds), and the mean over tasks of each task's success
    averaged over the seeds minus the reference's, with a 95% t-interval over the tasks — whether
    training moved these runs past where they started, on these tasks.
    """
    rows: list[list[str]] = []
    groups = table.groupby(list(by), sort=False, dropna=False) if by else [((), table)]
    for _, part in groups:
        cells = part[part["cell"].isin(list(episodes))]
        if cells.empty:
            continue
        joined = pd.concat(
            [
                episodes[c].merge(reference, on=["evaluation", "task_id", "sample"], suffixes=("_a", "_b"))
                for c in cells["cell"]
            ],
            ignore_index=True,
        )
        seeds = ", ".join(map(str, sorted(cells[SEED_KEY]))) if SEED_KEY in cells else "—"
        head = [*map(_label, _group_values(part, by)), seeds]
        rows += [head + c for c in _task_rows(joined)]
    columns = ["evaluation", "tasks", "episodes won only by the runs / the reference", "success − reference"]
    return _task_lines([*by, "seeds", *columns], rows)


def _difference(values: pd.Series, unit: Unit) -> str:
    """Mean [95% t-interval] of per-task differences, signed."""
    mean, low, high = mean_ci(values.tolist())
    return f"{value_text(mean, unit, True)} [{value_text(low, unit, True)}, {value_text(high, unit, True)}]"


# the field that names the task kinds a warm start never saw
EXCLUDE_FIELD = "policy.sft_exclude_kinds"


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
    return _frame(rows, by)


def left_out_kinds(out_dirs: Sequence[str | Path], manifest: Mapping) -> tuple[str, ...]:
    """The task kinds the warm start of a sweep's cells left out (``policy.sft_exclude_kinds`` as they
    ran with it: a grid key, a fixed parameter, else their preset's), ``()`` where it left none out. A
    ValueError where the cells differ in it: then name the kinds (``--by-kind KIND,KIND``)."""
    if EXCLUDE_FIELD in manifest["keys"]:
        values = {tuple(_names(c.get(EXCLUDE_FIELD))) for c in manifest["cells"].values()}
    else:
        values = {tuple(_names(_ran_with_field(d, EXCLUDE_FIELD))) for d in out_dirs}
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


def _names(value: Any) -> list[str]:
    """Task kinds as a config holds them (a tuple), a parameter (text, comma-separated) or JSON (a list)."""
    names = value.split(",") if isinstance(value, str) else list(value or ())
    return sorted(n.strip() for n in names if n.strip())


def _ran_with_field(out_dir: str | Path, dotted: str) -> Any:
    """The value of config field ``dotted`` that a sweep folder's cells ran with where its grid does
    not vary it: its fixed parameter, else its preset's (``preset_fields``), else None."""
    manifest, _ = load_sweep(out_dir)
    defaults = _notebook_defaults(manifest.get("notebook"))
    parameters = {k: defaults.get(k) for k in ("PRESET", "env.name")} | manifest.get("parameters", {})
    return preset_fields(parameters).get(dotted, parameters.get(dotted))


def cell_episodes(folders: Mapping[str, Path], cells: Sequence[str]) -> dict[str, pd.DataFrame]:
    """``load_episodes`` of each of ``cells`` that recorded its final evaluations' episodes."""
    found = {}
    for name in cells:
        with contextlib.suppress(FileNotFoundError):
            found[name] = load_episodes(folders[name])
    return found


# run_statistics: name -> (metrics column, how its values over the iterations are combined)
SWAP_STATISTICS = {
    "explorer_success": ("swap/explorer_success", "mean"),
    "rescued_groups": ("swap/rescued_groups", "sum"),
    "zero_var_before_share": ("swap/zero_var_groups_before", "mean"),
    "zero_var_after_share": ("swap/zero_var_groups_after", "mean"),
    "tau": ("swap/process_outcome_tau", "mean"),
    "hacking_rate": ("swap/explorer_hacking_rate", "mean"),
    "is_weight": ("is/mean", "mean"),
    "is_clipped_share": ("is/clipped_frac", "mean"),
    "approx_kl": ("loss/approx_kl", "mean"),
    "explorer_approx_kl": ("explorer/loss/approx_kl", "mean"),  # how far its dense step moves it
    # the paper's loop, per loop: B's dense return before and after its k steps, its collection's
    # success, the won share of what A drew, and the shifted clip on the replayed steps
    "dense_before": ("explorer/dense_before", "mean"),
    "dense_after": ("explorer/dense_after", "mean"),
    "collect_success": ("swap/collect_success", "mean"),
    "drawn_success_share": ("swap/drawn_success_share", "mean"),
    "offpolicy_clip_frac": ("offpolicy/clip_frac", "mean"),
    "offpolicy_grad_share": ("offpolicy/grad_share", "mean"),
}
# every run_statistics column, in the table's order: the explorer's edge (its success minus the
# actor's, same tasks and iterations) beside its success, and the same in the outcome the run trains
# on where that is not the success (WebShop's score / 100 with OUTCOME_MODE "score")
STATISTICS = (
    *("actor_updates", "explorer_steps_share", "rollout_start_success", "rollout_end_success"),
    *("rollout_start_outcome", "rollout_end_outcome"),
    *("explorer_success", "explorer_minus_actor_success"),
    *("explorer_outcome", "explorer_minus_actor_outcome"),
    *(k for k in SWAP_STATISTICS if k != "explorer_success"),
)


def starting_policies(
    folders: Mapping[str, Path], cells: Sequence[str], reference: str | Path | None = None
) -> str:
    """One line naming the policies that ``cells`` (and the reference run) started from, by the first
    12 hex digits of their weights' digest (``start.json``); "" when none of them recorded one (runs
    that kept no ``start.json``). Cells that started from different policies pair across warm starts: their
    differences compare the warm starts as well as the variants, and the line says so."""
    by_digest: dict[str, list[str]] = {}
    for name in cells:
        start = read_start(folders[name]) or {}
        by_digest.setdefault(start.get("weights_sha256", "")[:12], []).append(name)
    ref = (read_start(reference) or {}).get("weights_sha256", "")[:12] if reference is not None else ""
    if set(by_digest) == {""} and not ref:
        return ""
    parts = [
        f"{len(names)} cells from {digest}" + (" (the reference's)" if digest == ref else "")
        for digest, names in sorted(by_digest.items(), key=lambda kv: -len(kv[1]))
        if digest
    ]
    if "" in by_digest:
        parts.append(f"{len(by_digest[''])} cells recorded none")
    if ref and ref not in by_digest:
        parts.append(f"the reference from {ref}")
    line = "Starting policies (weights digest, start.json): " + "; ".join(parts) + "."
    if len([d for d in by_digest if d]) > 1:
        line += " Cells that started from different policies compare warm starts as well as variants."
    return line


def run_statistics(metrics: pd.DataFrame, window: int = 10) -> dict[str, float]:
    """How a run spent its budget and what its swap did, from its per-iteration metrics.

    Actor updates, the explorer's share of the env steps, the sampled success of the actor's own
    rollouts over the first and the last ``window`` iterations, the swap statistics over all
    iterations (``SWAP_STATISTICS``: means, rescued groups summed) and the explorer's success minus
    the actor's (mean over the iterations with both); NaN where the run has none. A run of the paper's
    loop counts both from its ``budget/*`` columns (k updates of A a loop), and its explorer's success
    is its collection's (``swap/collect_success``). The ``*_outcome``
    columns repeat the rollout and explorer numbers in the outcome reward the run trains on
    (``outcome_return``), and are NaN where that is the success itself (same value every iteration).

    >>> m = pd.DataFrame({"iteration": [0, 1, 2], "rollout/cumulative_env_steps": [0, 90, 180],
    ...     "rollout/env_steps": [None, 60, 60], "rollout/success": [None, 0.25, 0.5],
    ...     "swap/rescued_groups": [None, 1, 0], "swap/explorer_success": [None, 0.5, 0.25]})
    >>> s = run_statistics(m, window=1)
    >>> s["actor_updates"], round(s["explorer_steps_share"], 3), s["rollout_start_success"], s["rollout_end_success"]
    (2.0, 0.333, 0.25, 0.5)
    >>> s["rescued_groups"], s["explorer_success"], s["explorer_minus_actor_success"], math.isnan(s["tau"])
    (1.0, 0.375, 0.0, True)
    """
    steps = metrics[metrics["iteration"] > 0]

    def column(name: str) -> pd.Series:
        return steps[name].dropna() if name in steps else pd.Series(dtype=float)

    total = metrics["rollout/cumulative_env_steps"].max() if "rollout/cumulative_env_steps" in metrics else 0
    actor = column("rollout/env_steps").sum()
    updates = float(len(steps))
    if "budget/actor_updates" in metrics:  # counted per role: the paper's loop, and any run that logs them
        updates = float(metrics["budget/actor_updates"].max())
        total = metrics["budget/env_steps"].max()
        actor = metrics["budget/env_steps_actor"].max()
    success = column("rollout/success")
    stats = {
        "actor_updates": updates,
        "explorer_steps_share": float(1 - actor / total) if total else math.nan,
        "rollout_start_success": float(success.head(window).mean()) if len(success) else math.nan,
        "rollout_end_success": float(success.tail(window).mean()) if len(success) else math.nan,
    }
    for name, (key, how) in SWAP_STATISTICS.items():
        values = column(key)
        stats[name] = float(getattr(values, how)()) if len(values) else math.nan
    if "swap/explorer_success" not in steps and "swap/collect_success" in steps:
        stats["explorer_success"] = stats["collect_success"]  # the paper's loop: B's collection
    explorer_success = column(
        "swap/explorer_success" if "swap/explorer_success" in steps else "swap/collect_success"
    )
    stats["explorer_minus_actor_success"] = _mean_difference(explorer_success, success)
    outcome = column("rollout/outcome_return")
    if len(outcome) and not (outcome - success.reindex(outcome.index)).abs().max() < 1e-9:
        explorer = column("explorer_rollout/outcome_return")
        stats |= {
            "rollout_start_outcome": float(outcome.head(window).mean()),
            "rollout_end_outcome": float(outcome.tail(window).mean()),
            "explorer_outcome": float(explorer.mean()) if len(explorer) else math.nan,
            "explorer_minus_actor_outcome": _mean_difference(explorer, outcome),
        }
    return {k: stats.get(k, math.nan) for k in STATISTICS}


def _mean_difference(explorer: pd.Series, actor: pd.Series) -> float:
    """The explorer's value minus the actor's, averaged over the iterations that have both."""
    edge = (explorer - actor.reindex(explorer.index)).dropna()
    return float(edge.mean()) if len(edge) else math.nan


def sweep_statistics(
    out_dir: str | Path,
    loaded: tuple[dict, list[dict]] | None = None,
    folders: Mapping[str, Path] | None = None,
) -> pd.DataFrame:
    """One row per finished cell of a sweep: its name, grid values and ``run_statistics`` of its run
    (``loaded``: what ``load_sweep(out_dir)`` returned, if the caller has it already; ``folders``:
    each cell's run folder where it is not ``out_dir / cell``, as ``pooled_sweep`` returns them)."""
    manifest, rows = loaded or load_sweep(out_dir)
    folders = folders or {name: Path(out_dir) / name for name in manifest["cells"]}
    return _frame(
        [
            {"cell": r["cell"], **manifest["cells"][r["cell"]]}
            | run_statistics(load_metrics(folders[r["cell"]]))
            for r in rows
        ],
        manifest["keys"],
    )


def statistics_columns(stats: pd.DataFrame) -> list[str]:
    """The ``run_statistics`` columns that some run of ``stats`` has (plain runs have no swap)."""
    return [k for k in STATISTICS if k in stats and stats[k].notna().any()]


def running_statistics(folders: Mapping[str, Path], manifest: dict, finished: set[str]) -> pd.DataFrame:
    """``run_statistics`` so far of the cells that have started and not finished (tuning mid-run)."""
    rows = []
    for name, params in manifest["cells"].items():
        if name in finished:
            continue
        try:
            metrics = load_metrics(folders[name])
        except (FileNotFoundError, ValueError):  # not started, or caught halfway through writing a row
            continue
        if "iteration" not in metrics:  # has logged nothing yet
            continue
        rows.append({"cell": name, **params} | run_statistics(metrics))
    return _frame(rows, manifest["keys"])


def _notebook_defaults(notebook: str | None) -> dict[str, Any]:
    """The literal values of a sweep notebook's parameters cell, under their config names
    (``config_params``); {} if it cannot be read from here."""
    if not notebook or not Path(notebook).is_file():
        return {}
    cells = read_json(notebook).get("cells", [])
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    defaults = {}
    for node in ast.parse("".join(tagged[0]["source"]) if tagged else "").body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(ValueError, SyntaxError):
                defaults[node.targets[0].id] = ast.literal_eval(node.value)
    return config_params(defaults)


# parameters that say how a run was executed, not what it computed: never a column of their own
# (a warm start installed from a folder is the cached one of the same key: its weights are checked)
RUNTIME_KEYS = {"INTERACTIVE", "THREADS", "RUN_DIR", "train.threads", "train.progress_bar", "train.run_dir"}
RUNTIME_KEYS |= {"policy.warmstart_from"}


def preset_fields(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Every config field the runs of a sweep folder ran with, where its fixed ``parameters`` (under
    config names) name a ``PRESET``: the preset's values, the fixed config fields over them (None
    keeps the preset's); {} without a preset known here."""
    from rspo_kit.train.config import preset

    try:
        cfg = preset(parameters.get("PRESET"), env=parameters.get("env.name"))
    except (ValueError, TypeError):
        return {}
    for key, value in parameters.items():
        if "." in key and value is not None:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                cfg.override(key, value)
    return {f"{part}.{name}": v for part, fields in cfg.to_dict().items() for name, v in fields.items()}


def pooled_sweep(out_dirs: Sequence[str | Path]) -> tuple[dict, list[dict], dict[str, Path]]:
    """One or several sweep folders read as one sweep: the manifest, the finished cells' rows (as
    ``load_sweep``) and each cell's run folder.

    A cell's value of a key it did not vary (a key another folder varies, or a later grid of its own
    folder added) is the one it ran with: its folder's fixed parameter (``-p``), else its preset's
    (``preset_fields``), else the notebook's default (None if the notebook cannot be read from here). A
    fixed key or config field joins the grid keys where the folders differ in it, so a change of
    protocol shows as a column instead of pooling unlike runs; folders with presets are compared field
    by field, so a protocol preset and the same settings given one by one pool. A cell finished in
    two folders is an error; one that several folders list is read from the folder where it finished,
    else from the first where its run started (an archive lists the cells its sweep had not finished,
    which a later folder may run).
    """
    loaded = [(Path(d), *load_sweep(d)) for d in out_dirs]
    grid_keys = list(dict.fromkeys(k for _, m, _ in loaded for k in m["keys"]))
    fixed_keys = list(dict.fromkeys(k for _, m, _ in loaded for k in m.get("parameters", {})))
    defaults = {n: _notebook_defaults(n) for n in {m.get("notebook") for _, m, _ in loaded}}
    fields = [
        preset_fields(
            {k: defaults[m.get("notebook")].get(k) for k in ("PRESET", "env.name")} | m.get("parameters", {})
        )
        for _, m, _ in loaded
    ]
    if all(fields):  # compared field by field, whatever the presets were called
        fixed_keys = [k for k in dict.fromkeys([*fixed_keys, *fields[0]]) if k != "PRESET"]
    resolved = {id(m): f for (_, m, _), f in zip(loaded, fields, strict=True)}

    def ran_with(manifest: dict, params: dict, key: str) -> Any:
        if key in params:
            return params[key]
        value = manifest.get("parameters", {}).get(key)
        if value is None:
            value = resolved[id(manifest)].get(key)
        return defaults[manifest.get("notebook")].get(key) if value is None else value

    differing = [
        k
        for k in fixed_keys
        if k not in grid_keys
        and k not in RUNTIME_KEYS
        and len({json.dumps(ran_with(m, {}, k), default=str) for _, m, _ in loaded}) > 1
    ]
    keys = [*grid_keys, *differing]
    cells: dict[str, dict] = {}
    folders: dict[str, Path] = {}
    pooled_rows = []
    finished_in: dict[str, Path] = {}
    for out, manifest, rows in loaded:
        done = {r["cell"] for r in rows}
        for name, params in manifest["cells"].items():
            if name in done and name in finished_in:
                raise ValueError(
                    f"cell {name} finished in both {finished_in[name]} and {out}: pool distinct cells"
                )
            if name in cells and name not in done and (name in finished_in or folders[name].exists()):
                continue  # unfinished here, finished or started in a folder before
            cells[name], folders[name] = {k: ran_with(manifest, params, k) for k in keys}, out / name
            if name in done:
                finished_in[name] = out
        pooled_rows += [r | cells[r["cell"]] for r in rows]
    common = {k: v for k, v in loaded[0][1].get("parameters", {}).items() if k not in keys}
    return {"keys": keys, "cells": cells, "parameters": common}, pooled_rows, folders


def aggregate_pooled(
    out_dirs: Sequence[str | Path], into: str | Path, *, curve: str = "curve_success"
) -> pd.DataFrame:
    """``aggregate`` of several sweep folders read as one (``pooled_sweep``: e.g. a new sweep and the
    archives of other seeds), written into ``into`` (created) as ``pooled_results.csv``,
    ``pooled_summary.csv`` and ``pooled_curves.html``. The folders are only read: archives stay as
    committed, and a folder's own ``results.csv`` stays its own when ``into`` is one of them."""
    manifest, rows, _ = pooled_sweep(out_dirs)
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    names = ", ".join(Path(d).name for d in out_dirs)
    table = write_aggregate(rows, manifest["keys"], into, curve=curve, prefix="pooled_", name=names)
    table.attrs.update(cells=len(manifest["cells"]), finished=len(rows), keys=manifest["keys"])
    return table


def pooled_status(out_dirs: Sequence[str | Path]) -> list[CellOutcome]:
    """Every cell of the folders ``pooled_sweep`` reads as one sweep: "skipped" where it has results,
    else "pending" (``sweep_status`` for a grid in one folder)."""
    manifest, rows, _ = pooled_sweep(out_dirs)
    finished = {r["cell"] for r in rows}
    return [CellOutcome(name, "skipped" if name in finished else "pending") for name in manifest["cells"]]


def varying_keys(manifest: Mapping) -> list[str]:
    """The grid keys whose value differs between the sweep's cells (all of them, not only the
    finished ones), seeds aside: what tells the report's groups apart."""
    values = {
        k: {json.dumps(c.get(k), sort_keys=True) for c in manifest["cells"].values()}
        for k in manifest["keys"]
    }
    return [k for k in manifest["keys"] if k != SEED_KEY and len(values[k]) > 1]


def default_metrics(table: pd.DataFrame) -> list[str]:
    """The metrics a report shows when none are asked for: the final test evaluations if recorded."""
    return [m for m in DEFAULT_METRICS if m in table] or [m for m in FALLBACK_METRICS if m in table]


def curves_page(
    out_dirs: Sequence[str | Path],
    path: str | Path,
    curve: str = "curve_success",
    metrics: Sequence[str] = (),
    x: str = CURVE_X,
) -> Path:
    """The learning curves of a sweep read from one folder or several (``pooled_sweep``) as a
    standalone page, as ``aggregate`` writes ``curves.html`` for one folder: ``curve`` against ``x``
    (env steps, or A's updates with ``curve_actor_updates``: ``CURVE_AXES``), a colour per group of
    the keys that vary, thin lines the seeds and a thick one their mean, and under the figure each
    group's mean and 95% interval over seeds of ``metrics`` (default: those the report shows). Pooled
    archives of several sweeps get one figure."""
    manifest, rows, _ = pooled_sweep(out_dirs)
    recorded = sorted(
        {k for r in rows for k, v in r.items() if k.startswith("curve_") and isinstance(v, list)}
    )
    recorded = [k for k in recorded if k not in CURVE_AXES]  # the x of the curves
    if not any(x in r for r in rows):
        raise ValueError(f"no finished cell recorded {x!r}, the x of the curves asked for")
    if curve not in recorded:
        raise ValueError(
            f"no finished cell recorded {curve!r}; recorded: {', '.join(recorded) or 'no curves'}"
        )
    by = varying_keys(manifest)
    table = _frame(rows, manifest["keys"])
    summary = summarize(table, [k for k in by if k in table], list(metrics) or default_metrics(table))
    names = ", ".join(Path(d).name for d in out_dirs)
    what = "env steps" if x == CURVE_X else "updates of A"
    return write_figure_html(
        curve_figure(rows, by, curve, x=x), Path(path), summary, title=f"{names}: {curve} vs {what}"
    )


def report(
    out_dirs: str | Path | Sequence[str | Path],
    metrics: Sequence[str] = (),
    statistics: bool = False,
    paired: Sequence[Pair] = (),
    reference: str | Path | None = None,
    by_kind: Sequence[str] | None = None,
) -> str:
    """The Markdown report of the sweep in ``out_dirs``, one folder or several read as one sweep
    (``pooled_sweep``; see the module docstring). ``reference``: a run folder with final episodes
    (e.g. ``OUT/warmstart_run`` of ``sweep --reference-run``) that every group is compared with task by
    task. ``by_kind``: the task kinds to split every final evaluation by (``split_by_kind``), or ``()``
    for the kinds the cells' warm start left out (``sweep_left_out_kinds``); None does not split."""
    out_dirs = [out_dirs] if isinstance(out_dirs, (str, Path)) else list(out_dirs)
    manifest, rows, folders = pooled_sweep(out_dirs)
    start = load_episodes(reference) if reference is not None else None
    if by_kind is not None:
        left_out = tuple(by_kind) or sweep_left_out_kinds(out_dirs, manifest)
        start = split_by_kind(start, left_out) if start is not None else None
    total = len(manifest["cells"])
    finished = {r["cell"] for r in rows}
    unfinished = [
        f"- {name}: {cell_progress(folders[name]) or 'not started'}"
        for name in manifest["cells"]
        if name not in finished
    ]
    by = varying_keys(manifest)
    tables = []
    if rows:
        table = _frame(rows, manifest["keys"])
        metrics = list(metrics) or default_metrics(table)
        tables.append(markdown_table(table, [k for k in by if k in table], metrics))
        # the final episodes, read once for the task-by-task tables
        wanted = paired or start is not None or by_kind is not None
        episodes = cell_episodes(folders, [r["cell"] for r in rows]) if wanted else {}
        lacking = len(rows) - len(episodes)
        caption = "the interval is over tasks, for these runs" + (
            f"; {lacking} finished cells recorded no episodes" if lacking else ""
        )
        if by_kind is not None:
            tables.append(_kind_section(table, episodes, left_out, [k for k in by if k in table], start))
            episodes = {cell: split_by_kind(e, left_out) for cell, e in episodes.items()}
            rollouts = rollout_kind_table(table, folders, left_out, [k for k in by if k in table])
            if len(rollouts):  # live sweep folders only: archives keep no turn tables
                tables.append(
                    "Training rollouts by task kind (the runs' turn tables, every iteration; subgoals_reached: "
                    "the mean over episodes of the largest share of subgoals done):\n\n"
                    + rollout_markdown(rollouts)
                )
        if paired:  # one table per set of paired keys, grouped by every other key that varies
            per_keys: dict[tuple[str, ...], list[Pair]] = {}
            for pair in paired:
                per_keys.setdefault(tuple(pair_keys(pair)), []).append(pair)

            def others(keys: tuple[str, ...]) -> list[str]:
                return [k for k in by if k in table and k not in keys]

            tables.append(
                "Paired by seed:\n\n"
                + "\n\n".join(
                    paired_table(table, pairs, others(keys), metrics) for keys, pairs in per_keys.items()
                )
            )
            if episodes:
                tables.append(
                    f"Paired by seed and task (the final evaluations' episodes; {caption}):\n\n"
                    + "\n\n".join(
                        task_paired_table(table, episodes, pairs, others(keys))
                        for keys, pairs in per_keys.items()
                    )
                )
        if start is not None:
            tables.append(
                f"Against the reference run {reference}, task by task ({caption}):\n\n"
                + reference_table(table, episodes, start, [k for k in by if k in table])
            )
        if statistics:
            stats = sweep_statistics(out_dirs[0], (manifest, rows), folders)
            tables.append(markdown_table(stats, [k for k in by if k in stats], statistics_columns(stats)))
    running = running_statistics(folders, manifest, finished) if statistics else pd.DataFrame()
    if len(running):
        keys = [k for k in by if k in running] or ["cell"]
        tables.append(
            "Not finished, so far:\n\n" + markdown_table(running, keys, statistics_columns(running))
        )
    if rows:
        line = starting_policies(folders, [r["cell"] for r in rows], reference)
        tables += [line] if line else []
    where = ", ".join(map(str, out_dirs))
    note = (
        f"{len(rows)} of {total} cells finished ({where})"
        if rows
        else f"{where}: none of {total} cells has finished yet"
    )
    return "\n".join(["\n\n".join([*tables, note]), *unfinished])


def _kind_section(
    table: pd.DataFrame,
    episodes: Mapping[str, pd.DataFrame],
    left_out: Sequence[str],
    by: Sequence[str],
    start: pd.DataFrame | None,
) -> str:
    """``--by-kind``'s table: each half's success seed by seed, and the reference run's where there is one."""
    recorded = {k for e in episodes.values() for k in e["kind"]}
    if episodes and not recorded & set(left_out):
        raise ValueError(
            f"no final episode is of a kind left out ({', '.join(left_out)}); the episodes' kinds: "
            f"{', '.join(sorted(recorded))}"
        )
    split = kind_table(table, {c: split_by_kind(e, left_out) for c, e in episodes.items()}, by)
    head = (
        f"By task kind: the kinds the warm start left out ({', '.join(left_out)}) and the kinds it was shown"
    )
    if split.empty:
        return f"{head}: no finished cell recorded its final episodes."
    metrics = [c for c in split.columns if c.endswith("_success")]
    lines = [f"{head}:", "", markdown_table(split, by, metrics)]
    if start is not None:
        success = start.groupby("evaluation", sort=False)["won"].mean()
        shown = ", ".join(f"{kind_metric(e)} {value_text(v, 'percent')}" for e, v in success.items())
        lines += ["", f"The reference run: {shown}."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.experiments.report",
        description="Print a sweep's results as a Markdown table: every seed, mean and 95% t-interval.",
    )
    ap.add_argument("out", nargs="+", help="the sweep's output folder; several are read as one sweep")
    ap.add_argument(
        "--metrics",
        nargs="+",
        default=(),
        help=f"recorded metrics to report (default: {', '.join(DEFAULT_METRICS)} if recorded, else final_success)",
    )
    ap.add_argument(
        "--statistics",
        action="store_true",
        help="also a table of how each run spent its budget and what the swap did (from its metrics.jsonl)",
    )
    ap.add_argument(
        "--paired",
        action="append",
        default=[],
        metavar="KEY=A,B",
        help="also A − B seed by seed for two values of a grid key, e.g. variant=rspo,plain, or for cells "
        "told apart by several keys, e.g. 'variant=control&swap.replay_ratio=0.0,variant=plain' (repeatable)",
    )
    ap.add_argument(
        "--reference",
        default=None,
        metavar="RUN_DIR",
        help="also each group − this run (one with final_episodes.parquet, e.g. OUT/warmstart_run of "
        "`sweep --reference-run`), task by task",
    )
    ap.add_argument(
        "--by-kind",
        nargs="?",
        const="",
        default=None,
        metavar="KIND[,KIND]",
        help="split every final evaluation into the task kinds the warm start left out and the others: "
        f"their success seed by seed, and the task-by-task tables per half (kinds: the cells' {EXCLUDE_FIELD}, "
        "or those named)",
    )
    ap.add_argument(
        "--curves",
        default=None,
        metavar="HTML",
        help="also write the learning curves of every folder together to this page (plotly.js beside it)",
    )
    ap.add_argument(
        "--curve",
        default="curve_success",
        help="the recorded curve --curves draws (default: curve_success; WebShop: curve_score)",
    )
    ap.add_argument(
        "--curve-x",
        default=CURVE_X,
        choices=sorted(CURVE_AXES),
        help="the budget --curves draws against: env steps (curve_env_steps, default) or updates of A "
        "(curve_actor_updates, the paper's accounting)",
    )
    ap.add_argument(
        "--advantage-share",
        action="store_true",
        help="also where each finished cell's positive advantage goes, to steps of won or failed episodes "
        "(from its turn tables: a live sweep folder, not an archive)",
    )
    args = ap.parse_args(argv)
    try:
        pairs = [parse_pair(p) for p in args.paired]
        if args.curves:  # first, so that a curve no cell recorded fails before the report prints
            page = curves_page(args.out, args.curves, args.curve, args.metrics, args.curve_x)
            print(f"wrote {page}", file=sys.stderr)
        kinds = None if args.by_kind is None else _names(args.by_kind)
        print(report(args.out, args.metrics, args.statistics, pairs, args.reference, kinds))
        if args.advantage_share:
            from rspo_kit.experiments.advantage import advantage_share_report

            print("\n" + advantage_share_report(args.out))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
