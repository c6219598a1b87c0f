"""A sweep's plan: the cells of its grid, their file names, and the notebook parameters each one passes.

``expand_grid`` makes every combination of a grid's values and ``plan`` names each one (``cell_name``:
its ``KEY=value`` pairs, which name its output notebook and run directory). Grid keys and fixed
parameters are config fields or notebook parameters: ``notebook_parameters`` says what papermill
passes for them (dotted config fields into ``OVERRIDES``, ``variant``/``algo``/``seed`` as
``VARIANT``/``ALGO``/``SEED``), and ``check_config_fields`` fails on a dotted key that names no config
field. ``config_key`` and ``config_params`` read a grid's keys under the config fields' names, whatever
names the grid used (``CONFIG_KEYS``), so sweeps of either kind of name report in the same columns.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rspo_kit.train.presets import NOTEBOOK_PARAMETERS

MANIFEST = "sweep.json"  # a sweep folder's record of its notebook, grid keys, fixed parameters and cells
SEED_KEY = "train.seed"  # the key whose values are replicates: summaries average over it

# A grid names a setting by its config field (``algo.lr``), by notebook 04's parameter for it (``ALGO``:
# ``rspo_kit.train.presets.NOTEBOOK_PARAMETERS``, the one table of those names), or by the short name of
# the three keys nearly every grid varies, the parameter's name in lower case (``algo``, ``variant``,
# ``seed``). Both kinds of alias read as the field, so sweeps report in the same columns.
SHORT_NAMES = {parameter.lower(): parameter for parameter in ("ALGO", "VARIANT", "SEED")}
CONFIG_KEYS = {
    **NOTEBOOK_PARAMETERS,
    **{short: NOTEBOOK_PARAMETERS[parameter] for short, parameter in SHORT_NAMES.items()},
    "SWAP": "variant",  # notebooks 03 and 05 choose the variant by SWAP: True (RSPO), False (plain) or a name
}
VARIANT_OF_SWAP = {True: "rspo", False: "plain"}


def config_key(key: str, value: Any = None) -> tuple[str, Any]:
    """A grid key and value under the config field's name (``CONFIG_KEYS``); others as they are.

    >>> config_key("VARIANT", "rspo"), config_key("SWAP", True), config_key("seed", 2)
    (('variant', 'rspo'), ('variant', 'rspo'), ('train.seed', 2))
    >>> config_key("algo.lr", 3e-5), config_key("PRESET", "alfworld-40k")
    (('algo.lr', 3e-05), ('PRESET', 'alfworld-40k'))
    """
    name = CONFIG_KEYS.get(key, key)
    if key == "SWAP" and isinstance(value, bool):
        value = VARIANT_OF_SWAP[value]
    return name, value


def config_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters under their config names (``config_key``); an ``OVERRIDES`` dict as its dotted keys.

    >>> config_params({"ALGO": "gigpo", "VARIANT": "plain", "OVERRIDES": {"algo.lr": 1e-4}})
    {'algo.name': 'gigpo', 'variant': 'plain', 'algo.lr': 0.0001}
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key == "OVERRIDES" and isinstance(value, Mapping):
            out.update(value)
        else:
            name, value = config_key(key, value)
            out[name] = value
    return out


def notebook_parameters(params: Mapping[str, Any], known: set[str] | None = None) -> dict[str, Any]:
    """What papermill passes for a cell's ``params``: dotted config fields into ``OVERRIDES`` (over a
    given ``OVERRIDES`` dict), ``variant``/``algo``/``seed`` as ``VARIANT``/``ALGO``/``SEED``, the
    rest as they are. ``known``: the notebook's parameters, to fail on a config field it cannot take.

    >>> notebook_parameters({"PRESET": "alfworld-40k", "variant": "rspo", "algo.lr": 1e-4, "train.seed": 1})
    {'PRESET': 'alfworld-40k', 'VARIANT': 'rspo', 'OVERRIDES': {'algo.lr': 0.0001, 'train.seed': 1}}
    """
    out: dict[str, Any] = {}
    overrides = dict(params.get("OVERRIDES") or {})
    for key, value in params.items():
        if "." in key:
            overrides[key] = value
        elif key != "OVERRIDES":
            out[SHORT_NAMES.get(key, key)] = value
    if overrides:
        if known is not None and "OVERRIDES" not in known:
            raise ValueError(f"config fields {sorted(overrides)} need a notebook with an OVERRIDES parameter")
        out["OVERRIDES"] = overrides
    return out


def check_config_fields(params: Mapping[str, Any]) -> None:
    """Every dotted key of ``params`` names a config field: a typo fails before any cell runs."""
    from rspo_kit.train.config import RunConfig

    cfg = RunConfig()
    for key in (k for k in params if "." in k):
        section, _, name = key.partition(".")
        part = getattr(cfg, section, None)
        if not dataclasses.is_dataclass(part) or name not in {f.name for f in dataclasses.fields(part)}:
            raise ValueError(f"grid or parameter key {key!r} is not a config field (section.field)")


def expand_grid(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the last key varying fastest.

    >>> expand_grid({"algo.name": ["grpo", "gigpo"], "seed": [0, 1]})  # doctest: +NORMALIZE_WHITESPACE
    [{'algo.name': 'grpo', 'seed': 0}, {'algo.name': 'grpo', 'seed': 1},
     {'algo.name': 'gigpo', 'seed': 0}, {'algo.name': 'gigpo', 'seed': 1}]
    """
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"grid[{key!r}] must be a non-empty list of values, got {values!r}")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def name_part(value: Any) -> str:
    """A grid value as a cell name writes it: file-name characters only, ``true``, ``false`` and
    ``none`` in lower case, other values than text as JSON."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-") or "-"


def cell_name(params: Mapping[str, Any]) -> str:
    """A file name for a grid cell: ``KEY=value`` pairs joined by ``__``, in grid order.

    >>> cell_name({"algo.name": "gigpo", "variant": "rspo", "train.seed": 0})
    'algo.name=gigpo__variant=rspo__train.seed=0'
    >>> cell_name({"variant": "control", "algo.lr": 3e-4})
    'variant=control__algo.lr=0.0003'
    """
    return "__".join(f"{name_part(k)}={name_part(v)}" for k, v in params.items())


@dataclass(frozen=True)
class Cell:
    """One grid cell: its name, its grid values, where its notebook and run directory go."""

    name: str
    params: dict[str, Any]
    notebook: Path
    run_dir: Path


def plan(grid: Mapping[str, Sequence[Any]], out_dir: str | os.PathLike) -> list[Cell]:
    """The cells of a grid under ``out_dir``; names must be distinct."""
    out = Path(out_dir)
    cells = [
        Cell(cell_name(p), p, out / f"{cell_name(p)}.ipynb", out / cell_name(p)) for p in expand_grid(grid)
    ]
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise ValueError(f"grid values collide after making file names: {sorted(names)}")
    return cells


def parse_value(text: str) -> Any:
    """A grid or -p value given as text: JSON or a Python literal if it parses as one, else the text."""
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            pass
    return text
