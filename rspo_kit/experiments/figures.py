"""Figures of a sweep: learning curves as plotly figure specs, and standalone pages that show a figure.

A spec is a plain dict, so the library needs no plotly (``plotly.graph_objects.Figure(spec)`` shows
it); ``write_figure_html`` writes one to a page with plotly.js beside it and, readable without
JavaScript, a table under it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rspo_kit.experiments.grid import name_part
from rspo_kit.paths import atomic_write_text

CURVE_X = "curve_env_steps"  # recorded list: the x of every learning curve a notebook records
# the two budgets a curve is drawn against (recorded lists of notebook 04), with their axis titles: env
# steps (a user's cost: actor and explorer together) and updates of A (the paper's accounting)
CURVE_AXES = {
    CURVE_X: "environment steps (actor + explorer)",
    "curve_actor_updates": "updates of the actor A",
}
# one colour per group in the figures of sweeps (curves, success by kind)
GROUP_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _trace(x: list, y: list, name: str, group: str, line: dict, **extra: Any) -> dict:
    trace = {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": name, "legendgroup": group}
    return trace | {"line": line, **extra}


def curve_figure(
    rows: Sequence[Mapping[str, Any]], by: Sequence[str], curve: str = "curve_success", x: str = CURVE_X
) -> dict:
    """A plotly figure spec (plain dict): each cell's curve against ``x``, one colour per group.

    ``x`` is a recorded list of ``CURVE_AXES``: env steps (default) or A's updates
    (``curve_actor_updates``), the two budgets runs are compared at. Thin lines are single cells
    (seeds); the thick line of a group is the mean of its cells' curves interpolated onto a shared grid
    of ``x`` (up to the shortest run of the group). Plain data, so the library needs no plotly:
    ``plotly.graph_objects.Figure(spec)`` shows it.
    """
    if x not in CURVE_AXES:
        raise ValueError(f"curve_figure: x must be one of {sorted(CURVE_AXES)}, got {x!r}")
    axis = x
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        if axis in r and curve in r:
            groups.setdefault(tuple(r.get(k) for k in by), []).append(r)
    data = []
    for i, (key, members) in enumerate(groups.items()):
        label = ", ".join(f"{k}={name_part(v)}" for k, v in zip(by, key, strict=True)) or "all"
        color = GROUP_COLORS[i % len(GROUP_COLORS)]
        curves = []
        for r in members:
            points = [(x, y) for x, y in zip(r[axis], r[curve], strict=True) if y is not None]
            xs, ys = [x for x, _ in points], [y for _, y in points]
            curves.append((np.asarray(xs, float), np.asarray(ys, float)))
            line = {"color": color, "width": 1}
            data.append(
                _trace(xs, ys, r["cell"], label, line, showlegend=False, opacity=0.5, mode="lines+markers")
            )
        curves = [(x, y) for x, y in curves if len(x)]
        if curves:
            top = min(x.max() for x, _ in curves)
            grid = np.linspace(0.0, top, 20) if top > 0 else np.zeros(1)
            mean = np.mean([np.interp(grid, x, y) for x, y in curves], axis=0)
            name = f"{label} (mean of {len(curves)})"
            data.append(_trace(grid.tolist(), mean.tolist(), name, label, {"color": color, "width": 3}))
    layout = {
        "xaxis": {"title": {"text": CURVE_AXES[axis]}},
        "yaxis": {"title": {"text": curve.removeprefix("curve_")}},
        "legend": {"title": {"text": ", ".join(by)}},
    }
    return {"data": data, "layout": layout}


def _plotly_js(folder: Path) -> str:
    """Script tags for plotly.js: a copy next to the page (from the installed plotly) for offline use,
    and the CDN's copy of the same version when that file is missing, e.g. a page committed without it."""
    import importlib.util

    try:
        from plotly.offline import get_plotlyjs_version

        cdn = f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"
    except ImportError:
        cdn = "https://cdn.plot.ly/plotly-2.35.2.min.js"
    spec = importlib.util.find_spec("plotly")  # locates the package without importing it
    if spec and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
        if bundled.is_file():
            if not (folder / "plotly.min.js").is_file():
                shutil.copyfile(bundled, folder / "plotly.min.js")
            fallback = f"window.Plotly || document.write('<script src=\"{cdn}\"><\\/script>')"
            return f"<script src='plotly.min.js'></script><script>{fallback}</script>"
    return f"<script src='{cdn}'></script>"


def write_figure_html(spec: Mapping, path: Path, table: pd.DataFrame | None = None, title: str = "") -> Path:
    """A standalone page: the figure (needs JavaScript; plotly.js offline when plotly is installed)
    and, readable without JavaScript, ``table`` as plain HTML."""
    path = Path(path)
    scripts = _plotly_js(path.parent)
    page = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{title}</title>{scripts}</head><body>",
        f"<h3>{title}</h3><div id='fig' style='height:520px'></div>",
        "<noscript>The figure needs JavaScript; the table below does not.</noscript>",
        f"<script>Plotly.newPlot('fig', {json.dumps(spec.get('data', []))}, {json.dumps(spec.get('layout', {}))});</script>",
    ]
    if table is not None and len(table):
        page.append(table.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"))
    page.append("</body></html>")
    atomic_write_text(path, "\n".join(page))
    return path
