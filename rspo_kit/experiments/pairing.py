"""Differences between the variants of a sweep, paired: seed by seed, task by task, or against one run.

Cells that share a seed share their warm start and task draws, so ``a − b`` seed by seed
(``paired_table``) is the interval to read when two variants are close. Where the cells recorded
their final evaluations' episodes, ``task_paired_table`` pairs them task by task (each task's
difference averaged over the seeds, a 95% interval over the tasks: about these trained runs on these
tasks), and ``reference_table`` compares every group with one run the same way, e.g. with the warm
start. A pair is two values of one grid key (``variant=rspo,plain``) or two sets of values of
several (``parse_pair``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

import pandas as pd

from rspo_kit.experiments.grid import SEED_KEY, config_key, parse_value
from rspo_kit.experiments.intervals import mean_ci
from rspo_kit.experiments.tables import Unit, cell_text, grouped, unit_of, value_label, value_text

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


def paired_groups(
    table: pd.DataFrame, pairs: Sequence[Pair], by: Sequence[str]
) -> Iterator[tuple[str, tuple, pd.DataFrame, pd.DataFrame]]:
    """(the pair's label, the group's values of ``by``, side a's cells, side b's cells) for each pair
    and group of ``by``, each side's cells of the group indexed by seed (one cell a seed)."""
    for pair in pairs:
        _check_keys(table, pair)
        label = _pair_label(pair)
        for group, part in grouped(table, by):
            first, second = (_pair_cells(part, side).set_index(SEED_KEY) for side in _sides(pair))
            if not (first.index.is_unique and second.index.is_unique):
                raise ValueError(
                    f"{label}: several cells of {dict(zip(by, group, strict=True))} share a seed; "
                    f"group by the keys that tell them apart (by={list(by)})"
                )
            yield label, group, first, second


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
    for label, group, first, second in paired_groups(table, pairs, by):
        seeds = sorted(set(first.index) & set(second.index))
        if not seeds:
            continue
        cells = [
            cell_text([first.at[s, m] - second.at[s, m] for s in seeds], units[m], signed=True)
            for m in metrics
        ]
        lines.append(
            "| " + " | ".join([*map(value_label, group), label, ", ".join(map(str, seeds)), *cells]) + " |"
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
    for label, group, first_cells, second_cells in paired_groups(table, pairs, by):
        first, second = first_cells["cell"], second_cells["cell"]
        seeds = sorted(
            s for s in set(first.index) & set(second.index) if first[s] in episodes and second[s] in episodes
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
        head = [*map(value_label, group), label, ", ".join(map(str, seeds))]
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
    for group, part in grouped(table, by):
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
        head = [*map(value_label, group), seeds]
        rows += [head + c for c in _task_rows(joined)]
    columns = ["evaluation", "tasks", "episodes won only by the runs / the reference", "success − reference"]
    return _task_lines([*by, "seeds", *columns], rows)


def _difference(values: pd.Series, unit: Unit) -> str:
    """Mean [95% t-interval] of per-task differences, signed."""
    mean, low, high = mean_ci(values.tolist())
    return f"{value_text(mean, unit, True)} [{value_text(low, unit, True)}, {value_text(high, unit, True)}]"
