"""The notebook record shim: a notebook's last cell states its key results where a batch run finds them.

``record(results)`` prints one line ``RSPO_RESULTS {json}``. papermill keeps a cell's stdout in the
executed notebook, so the notebook itself carries its results: ``read_results(path)`` finds the last
such line again, and a sweep knows a cell is finished when its output notebook has one. With a
``run_dir`` the same dict is also written to ``run_dir/results.json`` (atomically: temp file + rename).

Values are JSON: numbers, strings, booleans, lists and dicts of them. numpy and torch scalars and
arrays become plain numbers and lists; a non-finite float becomes ``null`` (JSON has no NaN), so a
test that asserts finiteness sees it as missing rather than as a silent NaN.

Nothing here imports Jupyter: the notebook file is read as the JSON it is.

>>> results = record({"success": 0.25, "curve": [0.0, float("nan")]})
RSPO_RESULTS {"curve": [0.0, null], "success": 0.25}
>>> results
{'curve': [0.0, None], 'success': 0.25}
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rspo_kit.records.files import RecordError

TAG = "RSPO_RESULTS"
RESULTS_FILE = "results.json"


class NoResults(LookupError):
    """The notebook carries no ``RSPO_RESULTS`` line (not run, failed or killed before its last cell)."""


def _plain(value: Any) -> Any:
    """``value`` as plain JSON types (see the module docstring)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy / torch scalars and arrays
        return _plain(value.tolist())
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"record() takes JSON-like values; got {type(value).__name__}: {value!r}")


def record(results: Mapping[str, Any], run_dir: str | os.PathLike | None = None) -> dict:
    """Print ``RSPO_RESULTS <json>`` (one line, keys sorted) and write ``run_dir/results.json`` if given.

    Returns the recorded dict (plain JSON values) so a notebook can show it.
    """
    plain = _plain(dict(results))
    line = json.dumps(plain, sort_keys=True, allow_nan=False)
    if run_dir is not None:
        folder = Path(run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{RESULTS_FILE}.tmp"
        tmp.write_text(json.dumps(plain, sort_keys=True, indent=1) + "\n")
        tmp.replace(folder / RESULTS_FILE)
    print(f"{TAG} {line}", flush=True)
    return dict(sorted(plain.items()))


def _stdout_text(cell: Mapping[str, Any]) -> str:
    """Everything a code cell printed to stdout (stream outputs joined: Jupyter may split them)."""
    parts = []
    for output in cell.get("outputs", ()):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            text = output.get("text", "")
            parts.append("".join(text) if isinstance(text, list) else text)
    return "".join(parts)


def read_results(notebook_path: str | os.PathLike) -> dict:
    """The results of the last ``RSPO_RESULTS`` line in an executed notebook; ``NoResults`` if none."""
    path = Path(notebook_path)
    try:
        nb = json.loads(path.read_text())
    except FileNotFoundError:
        raise NoResults(f"{path} does not exist") from None
    except json.JSONDecodeError as err:  # a notebook being written when its run was killed
        raise NoResults(f"{path} is not a complete notebook ({err})") from None
    found = None
    for cell in nb.get("cells", ()):
        if cell.get("cell_type") != "code":
            continue
        for line in _stdout_text(cell).splitlines():
            if line.startswith(TAG + " "):
                found = line[len(TAG) + 1 :]
    if found is None:
        raise NoResults(f"{path} carries no {TAG} line")
    try:
        results = json.loads(found)
    except json.JSONDecodeError as err:
        raise RecordError(path, f"its {TAG} line is not valid JSON: {err.msg} (column {err.colno})") from None
    if not isinstance(results, dict):
        raise RecordError(path, f"its {TAG} line holds a {type(results).__name__}, not a JSON object")
    return results


def has_results(notebook_path: str | os.PathLike) -> bool:
    """Whether ``read_results`` would find results."""
    try:
        read_results(notebook_path)
    except NoResults:
        return False
    return True


def save_figure(fig: Any, run_dir: str | os.PathLike, name: str) -> Path:
    """Write a plotly figure to ``run_dir/<name>.html`` (plotly.js from its CDN) and return the path.

    Duck-typed (any object with ``to_html``), so the library never imports plotly. The file is the
    figure's static copy for places where no notebook JavaScript runs; it needs a browser online. The
    page is titled ``name`` (a browser's tab says which figure it is) and holds only the figure.
    """
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.html"
    body = fig.to_html(full_html=False, include_plotlyjs="cdn")
    head = f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(name)}</title></head><body>'
    path.write_text(f"{head}\n{body}\n</body></html>\n", encoding="utf-8")
    return path
