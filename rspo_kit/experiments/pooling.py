"""One or several sweep folders read as one sweep: e.g. a new sweep and the committed archives of
other seeds, or a knob added later in a second folder.

``pooled_sweep`` reads the folders' manifests and finished cells, with each cell's value of every key
that differs between the folders (its fixed parameter, else its preset's, else the notebook's
default), so that a change of protocol shows as a column instead of pooling unlike runs.
``aggregate_pooled`` writes what ``aggregate`` writes for one folder, ``pooled_status`` says which
cells have finished, ``cell_episodes`` reads the cells' final episodes.
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rspo_kit.experiments.aggregation import load_sweep, write_aggregate
from rspo_kit.experiments.cells import CellOutcome
from rspo_kit.experiments.grid import SEED_KEY, config_params
from rspo_kit.records import load_episodes, read_json


def notebook_defaults(notebook: str | None) -> dict[str, Any]:
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
    defaults = {n: notebook_defaults(n) for n in {m.get("notebook") for _, m, _ in loaded}}
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


def cell_episodes(folders: Mapping[str, Path], cells: Sequence[str]) -> dict[str, pd.DataFrame]:
    """``load_episodes`` of each of ``cells`` that recorded its final evaluations' episodes."""
    found = {}
    for name in cells:
        with contextlib.suppress(FileNotFoundError):
            found[name] = load_episodes(folders[name])
    return found
