"""The regime map: where RSPO's reward swap pays, over difficulty × misalignment × explorer setting.

A sweep on the mechanism testbed (the chain env) varies a level's difficulty (``env.name``, e.g.
``chain-4x2``: 4 rooms of 2 doors), the process reward's misalignment (``reward.misalign_eps``), the
variant (plain, rspo, control, process, mix) and the explorer's re-sync period (``swap.sync_every``: 1
re-synced to the actor every iteration, 0 never again), over seeds, every run at one env-step budget.
A *cell* of the map is one difficulty × ε × explorer setting. This module turns the sweep's per-run
results into the map:

- ``load_runs``: one row per finished run of one or several sweep folders or archives (read as one
  sweep by ``pooling.pooled_sweep``), with its run folder;
- ``regime_differences``: A − B (RSPO − plain, − process, − control) per cell, paired seed by seed,
  with the mean and its 95% t-interval over the seeds;
- ``swap_statistics``: per cell, what the swap did in the runs that have an explorer, from each run's
  ``metrics.jsonl`` (``run_swap_statistics``, over ``training_statistics.run_statistics``): the share
  of actor groups where every episode failed (no outcome variance: no gradient, and what a replayed
  success can rescue), rescued groups, the explorer's success minus the actor's, the explorer's
  Kendall τ between process return and outcome, and its hacking rate;
- ``difficulty_order``: the levels, easiest first;
- ``map_table``, ``map_figure``, ``describe_map``, ``map_record``: a cell-by-cell table of "mean [lo,
  hi]", the same as a plotly figure spec (a plain dict: the library never imports plotly), sentences
  that state what it shows, and its key numbers for ``rspo_kit.records.record``.

Notebook 07 (``notebooks/07_regime_map.ipynb``) draws the map from the committed archive
(``ARCHIVE``); ``RERUN_COMMANDS`` run the sweep and archive it again.

Why one module of this length: it is the whole study's reading (loading, differences, swap statistics,
tables, figure specs) for notebook 07 and ``results/regime_map``; no library code depends on it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rspo_kit.experiments.grid import MANIFEST, SEED_KEY
from rspo_kit.experiments.intervals import mean_ci
from rspo_kit.experiments.pooling import pooled_sweep
from rspo_kit.experiments.tables import Unit, unit_of, value_text
from rspo_kit.experiments.training_statistics import run_statistics
from rspo_kit.records import load_metrics

ARCHIVE = "results/regime_map/archive"  # the committed runs notebook 07 draws by default
PROTOCOL = "chain-4k"  # the testbed's protocol preset: budget, warm start, evaluations
SWEEP_OUT = "runs/sweeps/regime_map"
LEVELS = ["chain-4x2", "chain-4x2-cap10", "chain-4x2-cap8", "chain-4x3-cap8"]
EPS = [0.0, 0.5, 0.9]
SEEDS = [0, 1, 2]
# Four grids into one folder, read as one sweep. The variants without an explorer run once per
# difficulty × ε × seed and pair with every explorer setting (``regime_differences``); plain and the
# control never read the process reward (the control's explorer takes no dense update), so ε changes
# nothing they train on: their runs at ε 0.5 and 0.9 repeat those at 0 bit for bit (measured: plain
# GRPO on chain-4x2-cap8, 3 seeds), and they run at ε = 0 only and pair with every ε. GRPO, because an
# all-failure group gives it no gradient at all: the case the swap's replayed successes address.
RSPO_GRID = {
    "env.name": LEVELS,
    "reward.misalign_eps": EPS,
    "algo.name": ["grpo"],
    "variant": ["rspo"],
    "swap.sync_every": [1, 0],
    "train.seed": SEEDS,
}
CONTROL_GRID = RSPO_GRID | {"reward.misalign_eps": [0.0], "variant": ["control"]}
PLAIN_GRID = {k: v for k, v in CONTROL_GRID.items() if k != "swap.sync_every"} | {"variant": ["plain"]}
DENSE_GRID = PLAIN_GRID | {"reward.misalign_eps": EPS, "variant": ["process", "mix"]}


def _make_sweep(grid: Mapping[str, list]) -> str:
    return f"make sweep PROTOCOL={PROTOCOL} SWEEP_OUT={SWEEP_OUT} SWEEP_GRID='{json.dumps(grid)}'"


# the commands that run the map's sweep (resumable: rerun to continue) and archive it for notebook 07
RERUN_COMMANDS = (
    *(_make_sweep(grid) for grid in (RSPO_GRID, CONTROL_GRID, PLAIN_GRID, DENSE_GRID)),
    f".venv/bin/python -m rspo_kit.experiments.archive {SWEEP_OUT} {ARCHIVE}",
)
EXPLORER_VARIANTS = ("rspo", "control")  # the variants with an explorer, whose setting is a map key
EPS_FREE_VARIANTS = ("plain", "control")  # the variants whose training never reads the process reward
COMPARISONS = (("rspo", "plain"), ("rspo", "process"), ("rspo", "control"))
# run_swap_statistics' names, in its order; MAP_STATISTICS: those notebook 07 draws beside the map
SWAP_STATISTICS = (
    *("all_failure_share", "zero_var_share", "rescued_groups", "rescued_per_iteration"),
    *("actor_success", "explorer_success", "explorer_minus_actor_success", "tau", "hacking_rate"),
)
MAP_STATISTICS = (
    "all_failure_share",
    "rescued_groups",
    "explorer_minus_actor_success",
    "tau",
    "hacking_rate",
)


@dataclass(frozen=True)
class MapKeys:
    """The grid keys the map reads: its rows (difficulty), columns (ε), panels (explorer setting),
    the variant compared and the replicate (seed). A key a sweep did not vary reads as one level."""

    difficulty: str = "env.name"
    eps: str = "reward.misalign_eps"
    explorer: str = "swap.sync_every"
    variant: str = "variant"
    seed: str = SEED_KEY

    @property
    def cell(self) -> list[str]:
        return [self.difficulty, self.eps, self.explorer]


KEYS = MapKeys()


# ------------------------------------------------------------------------------------------ runs
def load_runs(sweeps: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """One row per finished run of the sweep folders or archives ``sweeps`` (read as one sweep:
    ``pooling.pooled_sweep``): ``cell``, the grid keys (under their config names, e.g. ``env.name``,
    ``variant``, ``train.seed``), every scalar the run recorded (e.g. ``final_eval_success``), and
    ``run_dir``, the run's folder (its ``metrics.jsonl`` feeds ``swap_statistics``). ``attrs``: the
    sweep's ``cells`` in all, ``finished`` and ``keys``."""
    sweeps = [sweeps] if isinstance(sweeps, (str, Path)) else list(sweeps)
    missing = [str(s) for s in sweeps if not (Path(s) / MANIFEST).is_file()]
    if missing:
        raise FileNotFoundError(
            f"no sweep at {', '.join(missing)} (no {MANIFEST}); the regime map's runs are made by:\n"
            + "\n".join(RERUN_COMMANDS)
        )
    manifest, rows, folders = pooled_sweep(sweeps)
    scalars = [{k: v for k, v in r.items() if isinstance(v, (int, float, str)) or v is None} for r in rows]
    table = pd.DataFrame(scalars)
    for key in manifest["keys"]:  # grid values as the cells have them: None stays None, ints stay ints
        if key in table:
            table[key] = pd.Series([r.get(key) for r in rows], index=table.index, dtype=object)
    table["run_dir"] = [str(folders[r["cell"]]) for r in rows]
    table.attrs.update(cells=len(manifest["cells"]), finished=len(rows), keys=manifest["keys"])
    return table


def _level(value: Any) -> Any:
    """A grid value as a level of the map: NaN (pandas' missing value) is None."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _prepared(runs: pd.DataFrame, keys: MapKeys) -> pd.DataFrame:
    """``runs`` with every map key as a column of levels (a key the sweep did not vary: None). A
    column of whole numbers that pandas turned into floats (a key some runs lack) is whole again."""
    runs = runs.copy()
    for key in [*keys.cell, keys.variant]:
        levels = [_level(v) for v in runs[key]] if key in runs else [None] * len(runs)
        if all(isinstance(v, float) and v.is_integer() for v in levels if v is not None):
            levels = [v if v is None else int(v) for v in levels]
        runs[key] = pd.Series(levels, index=runs.index, dtype=object)
    if keys.seed not in runs:
        raise ValueError(f"the runs have no {keys.seed!r} column: the map pairs and averages over seeds")
    return runs


def _select(frame: pd.DataFrame, values: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of ``frame`` with these values (None matches None, which ``==`` on a column does not)."""
    keep = pd.Series(True, index=frame.index)
    for key, value in values.items():
        keep &= frame[key].map(lambda v, value=value: v == value)
    return frame[keep]


def _levels(values: Iterable[Any]) -> list[Any]:
    """Distinct levels in order of appearance; numbers (ε, a sync period) in ascending order instead."""
    seen = list(dict.fromkeys(_level(v) for v in values))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen)
    return sorted(seen) if numeric else seen


def _chain_difficulty(level: Any) -> tuple[float, int] | None:
    """How hard a level named like ``chain-6x3`` or ``chain-4x2-cap8`` is, as a sort key: rooms · ln
    doors, then the spare steps its cap leaves over the 2 · rooms the expert needs, fewest last (the
    default cap is 3 · rooms); None for another name."""
    m = re.search(r"(\d+)x(\d+)(?:-cap(\d+))?", str(level))
    if m is None:
        return None
    rooms, doors = int(m.group(1)), int(m.group(2))
    cap = int(m.group(3)) if m.group(3) else 3 * rooms
    return rooms * math.log(doors), -(cap - 2 * rooms)


def difficulty_order(
    runs: pd.DataFrame, keys: MapKeys = KEYS, baseline: str = "plain", start: str = "start_success"
) -> list[Any]:
    """The difficulty levels of ``runs``, easiest first, never alphabetically.

    Levels named ``<rooms>x<doors>`` (``chain-6x3``) in order of how rarely a uniform random choice of
    door crosses every room, doors^-rooms (so by rooms · ln doors), then by the steps their episode
    cap (``-cap<steps>``) leaves to spare, most first; otherwise by the ``baseline``
    variant's mean ``start`` success (the starting policy's evaluation), highest first; otherwise in
    the order the runs list them.

    >>> runs = pd.DataFrame({"env.name": ["chain-8x4", "chain-10x2", "chain-4x2"], "train.seed": 0})
    >>> difficulty_order(runs)
    ['chain-4x2', 'chain-10x2', 'chain-8x4']
    >>> runs = pd.DataFrame({"env.name": ["chain-4x2-cap8", "chain-4x2", "chain-4x2-cap10"], "train.seed": 0})
    >>> difficulty_order(runs)
    ['chain-4x2', 'chain-4x2-cap10', 'chain-4x2-cap8']
    >>> runs = pd.DataFrame({"env.name": ["b", "a", "c", "a"], "variant": "plain",
    ...                      "start_success": [0.1, 0.2, 0.5, 0.4], "train.seed": 0})
    >>> difficulty_order(runs)
    ['c', 'a', 'b']
    """
    runs = _prepared(runs, keys)
    levels = list(dict.fromkeys(runs[keys.difficulty]))
    sizes = {level: _chain_difficulty(level) for level in levels}
    if all(sizes.values()):
        return sorted(levels, key=lambda level: sizes[level])
    if start in runs:
        base = runs[runs[keys.variant] == baseline]
        base = base if len(base) else runs
        means = {
            level: _select(base, {keys.difficulty: level})[start].astype(float).mean() for level in levels
        }
        return sorted(levels, key=lambda level: -means[level] if math.isfinite(means[level]) else math.inf)
    return levels


def _cells(runs: pd.DataFrame, keys: MapKeys, order: Sequence[Any]) -> list[tuple]:
    """Every (difficulty, ε, explorer setting) of ``runs``: difficulty in ``order``, then ε, setting."""
    present = set(zip(*(runs[k] for k in keys.cell), strict=True))
    eps, settings = _levels(runs[keys.eps]), _levels(runs[keys.explorer])
    return [(d, e, x) for d in order for e in eps for x in settings if (d, e, x) in present]


def _by_seed(part: pd.DataFrame, metric: str, keys: MapKeys, what: str) -> dict[Any, float]:
    """``metric`` per seed of ``part``; two runs of one seed are an error."""
    seeds = part[keys.seed].tolist()
    if len(set(seeds)) != len(seeds):
        raise ValueError(
            f"{what}: several runs share a seed ({sorted(seeds)}); select the runs of one setting of "
            "the keys that tell them apart first"
        )
    return {s: math.nan if v is None else float(v) for s, v in zip(seeds, part[metric], strict=True)}


# ------------------------------------------------------------------------------------ differences
def regime_differences(
    runs: pd.DataFrame,
    metric: str,
    a: str = "rspo",
    b: str = "plain",
    keys: MapKeys = KEYS,
    explorer_variants: Sequence[str] = EXPLORER_VARIANTS,
    eps_free_variants: Sequence[str] = EPS_FREE_VARIANTS,
) -> pd.DataFrame:
    """A − B of ``metric`` per cell of the map (difficulty × ε × A's explorer setting), seed by seed.

    ``runs``: one row per run (``load_runs``), with the columns of ``keys`` (a key missing, or None,
    is one level) and ``metric``. A run of ``a`` pairs with the run of ``b`` of the same seed,
    difficulty and ε; where ``b`` has an explorer (``explorer_variants``: RSPO − control) also of the
    same explorer setting. A baseline without an explorer (plain, process, mix) pairs with every
    explorer setting of ``a``: with its run of that setting where the sweep gave it one, else with its
    one run of that seed. A ``b`` of ``eps_free_variants`` (plain, control: ε changes nothing they
    train on) without runs at a cell's ε pairs with its runs at its lowest ε. A seed that either side lacks, or whose ``metric`` is missing (None, NaN), is
    left out of the pair, never counted as 0; a cell without a seed in common is left out.

    Returns one row per cell, difficulty easiest first (``difficulty_order``): the ``keys.cell``
    columns, ``a``, ``b``, ``metric``, ``seeds`` (list), ``n``, ``mean``, ``ci_low``, ``ci_high`` (the
    95% t-interval over the seeds' differences; NaN for one seed), ``clears_zero`` (the interval
    excludes 0) and ``differences`` (list, in seed order), in the metric's units (success: a fraction).
    """
    runs = _prepared(runs, keys)
    if metric not in runs:
        raise ValueError(f"no recorded metric {metric!r}; the runs have {sorted(runs.columns)}")
    first, second = (runs[runs[keys.variant] == v] for v in (a, b))
    rows = []
    for d, e, x in _cells(first, keys, difficulty_order(runs, keys)):
        cell = {keys.difficulty: d, keys.eps: e, keys.explorer: x}
        theirs = _select(second, {keys.difficulty: d})
        at_eps = _select(theirs, {keys.eps: e})
        if len(at_eps) or b not in eps_free_variants or not len(theirs):
            theirs = at_eps
        else:
            theirs = _select(theirs, {keys.eps: _levels(theirs[keys.eps])[0]})
        same = _select(theirs, {keys.explorer: x})
        theirs = same if b in explorer_variants or len(same) else theirs
        mine = _by_seed(_select(first, cell), metric, keys, f"{a} at {cell}")
        other = _by_seed(theirs, metric, keys, f"{b} at {cell}")
        seeds = sorted(s for s in mine.keys() & other.keys() if math.isfinite(mine[s] - other[s]))
        if not seeds:
            continue
        differences = [mine[s] - other[s] for s in seeds]
        mean, low, high = mean_ci(differences)
        stats = {"seeds": seeds, "n": len(seeds), "mean": mean, "ci_low": low, "ci_high": high}
        clears = len(seeds) > 1 and (low > 0 or high < 0)
        rows.append(cell | {"a": a, "b": b, "metric": metric} | stats | {"clears_zero": clears})
        rows[-1]["differences"] = differences
    columns = [*keys.cell, "a", "b", "metric", "seeds", "n", "mean", "ci_low", "ci_high", "clears_zero"]
    return pd.DataFrame(rows, columns=[*columns, "differences"])


# ------------------------------------------------------------------------------- swap statistics
def run_swap_statistics(metrics: pd.DataFrame) -> dict[str, float]:
    """What one run's swap did, from its per-iteration metrics (``load_metrics``); NaN where the run
    logged none (a run without an explorer, or one from before a metric existed).

    - ``all_failure_share``: the mean share of the actor's groups in which every episode failed
      (``swap/all_failure_groups_before``): no outcome variance, so no GRPO gradient, unless a
      replayed success rescues the group;
    - ``zero_var_share``: the mean share of the actor's groups without outcome variance (all failed
      or all won);
    - ``rescued_groups`` (summed over the run) and ``rescued_per_iteration``;
    - ``actor_success``, ``explorer_success``: the mean success of their rollouts;
      ``explorer_minus_actor_success``: the explorer's minus the actor's, over the iterations with both;
    - ``tau``: the explorer's mean Kendall τ between process return and outcome within a task's
      group; ``hacking_rate``: its share of top-quartile process returns that failed.

    >>> m = pd.DataFrame({"iteration": [0, 1, 2], "rollout/success": [None, 0.25, 0.5],
    ...     "swap/explorer_success": [None, 0.5, 0.5], "swap/rescued_groups": [None, 1, 2],
    ...     "swap/all_failure_groups_before": [None, 0.5, 0.25]})
    >>> s = run_swap_statistics(m)
    >>> s["all_failure_share"], s["rescued_groups"], s["rescued_per_iteration"]
    (0.375, 3.0, 1.5)
    >>> s["explorer_minus_actor_success"], math.isnan(s["tau"])
    (0.125, True)
    """
    stats = run_statistics(metrics)
    steps = metrics[metrics["iteration"] > 0]

    def mean(column: str) -> float:
        values = steps[column].dropna() if column in steps else pd.Series(dtype=float)
        return float(values.mean()) if len(values) else math.nan

    updates = stats["actor_updates"]
    out = {
        "all_failure_share": mean("swap/all_failure_groups_before"),
        "zero_var_share": stats["zero_var_before_share"],
        "rescued_groups": stats["rescued_groups"],
        "rescued_per_iteration": stats["rescued_groups"] / updates if updates else math.nan,
        "actor_success": mean("rollout/success"),
        "explorer_success": stats["explorer_success"],
        "explorer_minus_actor_success": stats["explorer_minus_actor_success"],
        "tau": stats["tau"],
        "hacking_rate": stats["hacking_rate"],
    }
    return {name: out[name] for name in SWAP_STATISTICS}


def _logged_statistics(run_dir: str | Path) -> dict[str, float]:
    """``run_swap_statistics`` of the run in ``run_dir``; all NaN for a run that kept no training log."""
    try:
        return run_swap_statistics(load_metrics(run_dir))
    except FileNotFoundError:
        return dict.fromkeys(SWAP_STATISTICS, math.nan)


def swap_statistics(
    runs: pd.DataFrame, keys: MapKeys = KEYS, variants: Sequence[str] = EXPLORER_VARIANTS
) -> pd.DataFrame:
    """Per cell of the map and variant with an explorer, each ``run_swap_statistics`` over the seeds.

    ``runs``: one row per run (``load_runs``) with a ``run_dir`` column; each run of ``variants`` is
    read from its ``metrics.jsonl``. Returns one row per variant, statistic (``SWAP_STATISTICS``'
    order) and cell (difficulty easiest first): the ``keys.cell`` columns, ``variant``, ``statistic``,
    ``n`` (the seeds with a value), ``mean``, ``ci_low``, ``ci_high`` (95% t-interval over the seeds)
    and ``values`` (list, in seed order). A statistic that no run of a cell logged (a run without
    ``metrics.jsonl`` logged none) has ``n`` 0.
    """
    runs = _prepared(runs, keys)
    if "run_dir" not in runs:
        raise ValueError("swap_statistics reads each run's metrics.jsonl: the runs need a run_dir column")
    ours = runs[runs[keys.variant].isin(list(variants))].sort_values(keys.seed, kind="stable")
    stats = pd.DataFrame(
        [_logged_statistics(run_dir) for run_dir in ours["run_dir"]],
        index=ours.index,
        columns=list(SWAP_STATISTICS),
    )
    order = difficulty_order(runs, keys)
    rows = []
    for variant in [v for v in variants if v in set(ours[keys.variant])]:
        mine = ours[ours[keys.variant] == variant]
        for name in SWAP_STATISTICS:
            for d, e, x in _cells(mine, keys, order):
                cell = {keys.difficulty: d, keys.eps: e, keys.explorer: x}
                values = [v for v in stats.loc[_select(mine, cell).index, name] if math.isfinite(v)]
                mean, low, high = mean_ci(values)
                summary = {"n": len(values), "mean": mean, "ci_low": low, "ci_high": high, "values": values}
                rows.append(cell | {"variant": variant, "statistic": name} | summary)
    columns = [*keys.cell, "variant", "statistic", "n", "mean", "ci_low", "ci_high", "values"]
    return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------------------------ the display
def interval_text(mean: float, low: float, high: float, unit: Unit, signed: bool = False) -> str:
    """``mean [low, high]``, fractions in percent; the mean alone without an interval; — without a mean.

    >>> interval_text(0.125, 0.031, 0.219, "percent", signed=True)
    '+12.5 [+3.1, +21.9]'
    >>> interval_text(3.0, math.nan, math.nan, "number"), interval_text(math.nan, 0.0, 1.0, "number")
    ('3', '—')
    """
    if not math.isfinite(mean):
        return "—"
    if not (math.isfinite(low) and math.isfinite(high)):
        return value_text(mean, unit, signed)
    return f"{value_text(mean, unit, signed)} [{value_text(low, unit, signed)}, {value_text(high, unit, signed)}]"


def explorer_label(value: Any, key: str = KEYS.explorer) -> str:
    """A panel's title: the explorer setting in words.

    >>> explorer_label(1), explorer_label(0)
    ('re-synced every iteration (swap.sync_every=1)', 'persistent (swap.sync_every=0)')
    >>> explorer_label(4)
    're-synced every 4 iterations (swap.sync_every=4)'
    >>> explorer_label(None), explorer_label(2.0, "swap.explorer_temperature")
    ('one explorer setting', 'swap.explorer_temperature=2.0')
    """
    if value is None:
        return "one explorer setting"
    if key != "swap.sync_every":
        return f"{key}={value}"
    words = {0: "persistent", 1: "re-synced every iteration"}.get(
        value, f"re-synced every {value} iterations"
    )
    return f"{words} ({key}={value})"


def _name(table: pd.DataFrame) -> str:
    """What a map table holds: its metric (a difference) or its statistic."""
    column = "metric" if "metric" in table else "statistic"
    names = list(dict.fromkeys(table[column]))
    if len(names) != 1:
        raise ValueError(f"a map shows one {column}; this table has {names}: select one first")
    return names[0]


def _is_difference(table: pd.DataFrame) -> bool:
    return "clears_zero" in table


def _unit(table: pd.DataFrame) -> Unit:
    return unit_of(_name(table), table["mean"])


def _cell_text(row: Mapping[str, Any], unit: Unit, signed: bool) -> str:
    text = interval_text(row["mean"], row["ci_low"], row["ci_high"], unit, signed)
    return text + (" *" if row.get("clears_zero") else "")


def _order(table: pd.DataFrame, keys: MapKeys, order: Sequence[Any] | None) -> list[Any]:
    present = list(dict.fromkeys(table[keys.difficulty]))
    return [d for d in order if d in present] if order is not None else present


def map_table(table: pd.DataFrame, keys: MapKeys = KEYS, order: Sequence[Any] | None = None) -> pd.DataFrame:
    """One map as text: a row per difficulty (``order``, else as ``table`` lists them), a column per
    explorer setting and ε, each cell "mean [95% interval]" (fractions in percent; differences signed
    and marked * where the interval excludes 0), — where the cell has no pair; empty for an empty table.

    ``table``: ``regime_differences``' output, or ``swap_statistics``' rows of one statistic and variant.
    """
    if table.empty:
        return pd.DataFrame()
    unit, signed = _unit(table), _is_difference(table)
    settings, eps = _levels(table[keys.explorer]), _levels(table[keys.eps])
    columns = pd.MultiIndex.from_tuples(
        [(explorer_label(x, keys.explorer), f"ε={e}") for x in settings for e in eps],
        names=[keys.explorer, keys.eps],
    )
    rows = []
    for d in _order(table, keys, order):
        texts = []
        for x in settings:
            for e in eps:
                found = _select(table, {keys.difficulty: d, keys.eps: e, keys.explorer: x})
                texts.append(_cell_text(found.iloc[0], unit, signed) if len(found) else "—")
        rows.append(texts)
    index = pd.Index(_order(table, keys, order), name=keys.difficulty)
    return pd.DataFrame(rows, index=index, columns=columns)


def _domains(count: int, gap: float) -> list[tuple[float, float]]:
    """``count`` equal spans of [0, 1] with ``gap`` between neighbours, in order."""
    size = (1 - gap * (count - 1)) / count
    return [(i * (size + gap), i * (size + gap) + size) for i in range(count)]


def _panel(
    part: pd.DataFrame,
    keys: MapKeys,
    difficulties: Sequence[Any],
    eps: Sequence[Any],
    setting: Any,
    signed: bool,
) -> tuple[list[list[float | None]], list[list[str]]]:
    """One heatmap's values (fractions in percent; None where a cell is missing) and cell texts."""
    unit = _unit(part)
    scale = 100.0 if unit == "percent" else 1.0
    z, text = [], []
    for d in difficulties:
        cells = [_select(part, {keys.difficulty: d, keys.eps: e, keys.explorer: setting}) for e in eps]
        means = [f.iloc[0]["mean"] if len(f) else math.nan for f in cells]
        z.append([scale * m if math.isfinite(m) else None for m in means])
        text.append([_cell_text(f.iloc[0], unit, signed) if len(f) else "" for f in cells])
    return z, text


def map_figure(
    table: pd.DataFrame,
    keys: MapKeys = KEYS,
    order: Sequence[Any] | None = None,
    title: str = "",
    facet: str | None = None,
) -> dict:
    """A plotly figure spec (plain dict; ``plotly.graph_objects.Figure(spec)`` shows it): a heatmap of
    difficulty (rows, easiest at the top) × ε (columns) per explorer setting (panels side by side),
    each cell annotated as in ``map_table``; differences on a red-blue scale centred on 0.

    ``facet``: a column of ``table`` with a row of panels per value, each on its own colour scale
    (``"statistic"`` for several of ``swap_statistics``' statistics); None: ``table`` is one map.
    """
    if table.empty:
        return {"data": [], "layout": {"title": {"text": f"{title}: no runs to compare"}}}
    facets = [None] if facet is None else list(dict.fromkeys(table[facet]))
    settings, eps = _levels(table[keys.explorer]), _levels(table[keys.eps])
    difficulties = _order(table, keys, order)
    rows_y = _domains(len(facets), 0.16 if len(facets) > 1 else 0.0)[::-1]  # the first facet on top
    cols_x = _domains(len(settings), 0.08)
    data, annotations = [], []
    layout: dict[str, Any] = {"title": {"text": title}, "height": 140 + 260 * len(facets)}
    for r, value in enumerate(facets):
        part = table if facet is None else table[table[facet] == value]
        unit, signed = _unit(part), _is_difference(part)
        colours = f"coloraxis{r + 1 if r else ''}"
        diverging = signed or bool((part["mean"] < 0).any())
        y0, y1 = rows_y[r]
        bar = {"title": {"text": _name(part) + (" (%)" if unit == "percent" else "")}}
        bar |= {"y": (y0 + y1) / 2, "len": y1 - y0, "yanchor": "middle"}
        layout[colours] = {"colorscale": "RdBu", "cmid": 0.0} if diverging else {"colorscale": "Blues"}
        layout[colours]["colorbar"] = bar
        for c, x in enumerate(settings):
            axis = "" if r * len(settings) + c == 0 else str(r * len(settings) + c + 1)
            z, text = _panel(part, keys, difficulties, eps, x, signed)
            trace = {"type": "heatmap", "x": [f"ε={e}" for e in eps], "y": [str(d) for d in difficulties]}
            trace |= {"z": z, "text": text, "texttemplate": "%{text}", "coloraxis": colours}
            trace |= {
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
                "hovertemplate": "%{y}, %{x}: %{text}<extra></extra>",
            }
            data.append(trace)
            layout[f"xaxis{axis}"] = {"domain": list(cols_x[c]), "anchor": f"y{axis}", "type": "category"}
            layout[f"yaxis{axis}"] = {"domain": [y0, y1], "anchor": f"x{axis}", "type": "category"}
            layout[f"yaxis{axis}"] |= {
                "autorange": "reversed",
                "title": {"text": keys.difficulty if c == 0 else ""},
            }
            label = explorer_label(x, keys.explorer) + ("" if value is None else f": {value}")
            annotations.append(
                {"text": label, "x": sum(cols_x[c]) / 2, "y": y1, "xref": "paper", "yref": "paper"}
                | {"xanchor": "center", "yanchor": "bottom", "showarrow": False}
            )
    layout["annotations"] = annotations
    return {"data": data, "layout": layout}


def _cell_name(row: Mapping[str, Any], keys: MapKeys) -> str:
    """A cell in words: ``chain-6x3, ε=0.5, sync_every=0``."""
    explorer = keys.explorer.rsplit(".", 1)[-1]
    return f"{row[keys.difficulty]}, ε={row[keys.eps]}, {explorer}={row[keys.explorer]}"


def describe_map(table: pd.DataFrame, keys: MapKeys = KEYS, label: str = "") -> str:
    """What one map shows, in numbers read from ``table`` (``map_table``'s input): how many cells and
    seeds; for differences the cells whose 95% interval clears zero, above and below, and the range of
    the means; for a statistic the range and its mean per explorer setting."""
    if table.empty:
        return f"{label or 'this map'}: no cell has a pair of runs yet."
    unit, signed = _unit(table), _is_difference(table)
    what = label or _name(table)
    units = {"percent": " (percentage points)" if signed else " (%)", "points": " (points)"}.get(unit, "")
    seeds = sorted(set(table["n"]))
    n_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    count = f"{len(table)} cell" + ("s" if len(table) != 1 else "")
    lines = [f"{what}{units}: {count}, {n_text} seeds each."]
    finite = table[table["mean"].map(lambda v: math.isfinite(v))]
    if signed:
        for side, chosen in (("above", finite["ci_low"] > 0), ("below", finite["ci_high"] < 0)):
            cells = finite[chosen]
            named = "; ".join(
                f"{_cell_name(r, keys)}: {_cell_text(r, unit, True)}" for _, r in cells.iterrows()
            )
            lines.append(
                f"The interval lies {side} zero in {len(cells)} of {len(table)} cells"
                + (f": {named}." if named else ".")
            )
    if len(finite):
        low, high = finite.loc[finite["mean"].idxmin()], finite.loc[finite["mean"].idxmax()]
        lines.append(
            f"Every cell's mean is {value_text(low['mean'], unit, signed)}."
            if low["mean"] == high["mean"]
            else f"Means range from {value_text(low['mean'], unit, signed)} ({_cell_name(low, keys)}) "
            f"to {value_text(high['mean'], unit, signed)} ({_cell_name(high, keys)})."
        )
        by = finite.groupby(keys.explorer, sort=False, dropna=False)["mean"].mean()
        if len(by) > 1:
            parts = [
                f"{explorer_label(_level(x), keys.explorer)} {value_text(v, unit, signed)}"
                for x, v in by.items()
            ]
            lines.append("Mean over the cells, by explorer setting: " + "; ".join(parts) + ".")
    return " ".join(lines)


def map_record(table: pd.DataFrame, keys: MapKeys = KEYS) -> dict[str, Any]:
    """A map's key numbers for ``rspo_kit.records.record``: ``cells``, ``seeds`` (the fewest of a
    cell), ``means`` and ``intervals`` per cell (``"chain-6x3, ε=0.5, sync_every=0"``, the metric's
    units), and for differences ``above_zero`` / ``below_zero``, the cells whose interval clears 0."""
    names = [_cell_name(r, keys) for _, r in table.iterrows()]
    out: dict[str, Any] = {"cells": len(table), "seeds": int(table["n"].min()) if len(table) else 0}
    if _is_difference(table):
        clear = table["clears_zero"].astype(bool)
        out |= {"above_zero": int((clear & (table["mean"] > 0)).sum())}
        out |= {"below_zero": int((clear & (table["mean"] < 0)).sum())}
    out["means"] = dict(zip(names, table["mean"], strict=True))
    out["intervals"] = {
        n: [lo, hi] for n, lo, hi in zip(names, table["ci_low"], table["ci_high"], strict=True)
    }
    return out
