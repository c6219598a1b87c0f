"""A sweep's cells as Markdown tables: one row per group, every seed's value, then the mean and its
95% t-interval over the seeds, e.g. ``20.0 / 15.8 / 25.0 → 20.3 [8.9, 31.7]``.

Each column is written in its unit (``unit_of``): success rates, scores, shares and rates in percent,
WebShop's scores in their points (0-100), counts as numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

import pandas as pd

from rspo_kit.experiments.grid import SEED_KEY
from rspo_kit.experiments.intervals import mean_ci

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
    for key, part in grouped(table, by):
        seeds = ", ".join(str(s) for s in part[SEED_KEY]) if SEED_KEY in part else str(len(part))
        cells = [cell_text(part[m].tolist(), units[m]) for m in metrics]
        lines.append("| " + " | ".join([*map(value_label, key), seeds, *cells]) + " |")
    return "\n".join(lines)


def value_label(value: object) -> str:
    """A grid value in a table cell; an empty string shows as "" rather than an empty cell.

    >>> value_label(True), value_label(None), value_label(""), value_label("none")
    ('True', 'None', '""', 'none')
    """
    return '""' if value == "" else str(value)


def group_values(part: pd.DataFrame, by: Sequence[str]) -> tuple:
    """A group's values of ``by`` as the cells have them (pandas names a group of None values NaN)."""
    return tuple(part[k].iloc[0] for k in by)


def grouped(table: pd.DataFrame, by: Sequence[str]) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """(its values of ``by``, as ``group_values``; its rows) of each group of ``table``, in the order of
    the rows; the whole table is one group where ``by`` is empty."""
    groups = table.groupby(list(by), sort=False, dropna=False) if by else [((), table)]
    for _, part in groups:
        yield group_values(part, by), part


def cells_frame(rows: Sequence[Mapping], keys: Sequence[str]) -> pd.DataFrame:
    """Rows as a table whose grid-key columns keep the cells' values (None stays None, not NaN)."""
    table = pd.DataFrame(list(rows))
    for k in keys:
        if k in table:
            table[k] = pd.Series([r.get(k) for r in rows], index=table.index, dtype=object)
    return table
