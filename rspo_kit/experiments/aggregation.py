"""A sweep's finished cells as tables: what each cell recorded, and its means with 95% intervals over seeds.

``load_sweep`` reads a sweep folder, its ``sweep.json`` and each finished cell's results (from its
output notebook, or in an archive from its run folder's ``results.json``), under config names;
``aggregate`` writes ``results.csv`` (one row per finished cell), ``summary.csv`` (``summarize``) and
the learning curves' pages (``rspo_kit.experiments.figures``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rspo_kit.experiments.figures import CURVE_X, curve_figure, write_figure_html
from rspo_kit.experiments.grid import MANIFEST, SEED_KEY, config_key, config_params
from rspo_kit.experiments.intervals import mean_ci
from rspo_kit.records.files import read_json
from rspo_kit.records.notebook import RESULTS_FILE, NoResults, read_results


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str)) or value is None


def config_manifest(manifest: Mapping[str, Any]) -> dict:
    """A sweep's manifest with its keys, cells' values and fixed parameters under their config names
    (``config_params``): ``ALGO=gigpo__VARIANT=plain__SEED=0`` reads as algo.name gigpo, variant plain,
    train.seed 0, like ``algo.name=gigpo__variant=plain__train.seed=0``."""
    keys = [config_key(k)[0] for k in manifest.get("keys", [])]
    cells = {name: config_params(params) for name, params in manifest.get("cells", {}).items()}
    parameters = config_params(manifest.get("parameters", {}))
    return {**manifest, "keys": list(dict.fromkeys(keys)), "cells": cells, "parameters": parameters}


def load_sweep(out_dir: str | os.PathLike) -> tuple[dict, list[dict]]:
    """The manifest (``config_manifest``: keys under config names) and, per cell with results,
    ``{"cell", grid values..., results...}`` (all values), in the order the grids listed the cells
    (e.g. plain, RSPO, control). A cell's results are its output notebook's; a cell without a
    notebook (an archive, ``rspo_kit.experiments.archive``) is read from its run folder's
    ``results.json``. A file that is not valid JSON is a ``RecordError`` naming it."""
    out = Path(out_dir)
    path = out / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"no {MANIFEST} in {out}: not a sweep folder")
    manifest = config_manifest(read_json(path))
    rows = []
    for name, params in manifest["cells"].items():
        notebook, archived = out / f"{name}.ipynb", out / name / RESULTS_FILE
        try:
            results = read_results(notebook)
        except NoResults:
            if notebook.exists() or not archived.exists():
                continue
            results = read_json(archived)
        rows.append({"cell": name, **params, **results})
    return manifest, rows


def aggregate(out_dir: str | os.PathLike, *, curve: str = "curve_success") -> pd.DataFrame:
    """One row per finished cell: its grid values and every scalar it recorded.

    Writes ``results.csv`` (this table), ``summary.csv`` (``summarize`` over seeds) and, when the
    cells recorded ``curve_env_steps`` and ``curve`` lists, ``curves.html`` (``curve_figure``), and
    ``curves_updates.html`` against A's updates where they recorded ``curve_actor_updates``.
    Unfinished cells are left out; ``table.attrs`` says how many cells the sweep has in all.
    """
    out = Path(out_dir)
    manifest, rows = load_sweep(out)
    table = write_aggregate(rows, manifest["keys"], out, curve=curve, name=out.name)
    table.attrs.update(cells=len(manifest["cells"]), finished=len(rows), keys=manifest["keys"])
    return table


def write_aggregate(
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    into: Path,
    *,
    curve: str = "curve_success",
    prefix: str = "",
    name: str = "",
) -> pd.DataFrame:
    """What ``aggregate`` writes, for ``rows`` as ``load_sweep`` returns them: the table of their
    scalars to ``into/<prefix>results.csv``, its ``summarize`` over seeds by the grid ``keys`` to
    ``<prefix>summary.csv`` and, where recorded, the ``curve`` of every row to ``<prefix>curves.html``
    (titled with ``name``). Returns the table."""
    table = pd.DataFrame([{k: v for k, v in r.items() if _scalar(v)} for r in rows])
    table.to_csv(into / f"{prefix}results.csv", index=False)
    by = [k for k in keys if k != SEED_KEY and k in table]
    summary = summarize(table, by) if len(table) else pd.DataFrame()
    summary.to_csv(into / f"{prefix}summary.csv", index=False)
    for x, (page, what) in {
        CURVE_X: ("curves", "env steps"),
        "curve_actor_updates": ("curves_updates", "updates of A"),
    }.items():
        if any(x in r and curve in r for r in rows):
            spec = curve_figure(rows, by, curve, x=x)
            write_figure_html(
                spec, into / f"{prefix}{page}.html", summary, title=f"{name}: {curve} vs {what}"
            )
    return table


def summarize(table: pd.DataFrame, by: Sequence[str], metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean and 95% CI over replicates (usually seeds) per group: one row per group and metric.

    ``metrics``: numeric result columns (default: every numeric column that is not a grid key).
    """
    by = list(by)
    if metrics is None:
        skip = {*by, SEED_KEY, "cell"}
        metrics = [c for c in table.columns if c not in skip and pd.api.types.is_numeric_dtype(table[c])]
        metrics = [m for m in metrics if not pd.api.types.is_bool_dtype(table[m])]
    groups = table.groupby(by, sort=False, dropna=False) if by else [((), table)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            mean, low, high = mean_ci(part[metric].astype(float).tolist())
            values = part[metric].dropna()
            stats = {"metric": metric, "n": len(values), "mean": mean, "ci_low": low, "ci_high": high}
            rows.append(dict(zip(by, key, strict=True)) | stats)
    return pd.DataFrame(rows)
