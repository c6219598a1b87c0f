"""What every widget shares: live figures, the error area, display, and the static HTML fallback.

A widget holds one or more plotly figures that it updates in place, an ipywidgets container
(``.widget``) and an error area. ``static_html()`` renders the current state as plain plotly HTML so
that a notebook run headless (papermill, ``INTERACTIVE = False``) stores something readable where no
widget JavaScript runs: ``show(widget, interactive=False)`` displays that instead of the widget.
"""

from __future__ import annotations

import html

import ipywidgets as W
import plotly.graph_objects as go

from rspo_widgets._guard import error_area


def live_figure(fig: go.Figure) -> go.Figure:
    """A ``FigureWidget`` copy of ``fig`` (updates in place in the notebook).

    plotly >= 6 builds FigureWidget on ``anywidget``; without it this returns a plain Figure and the
    widget falls back to re-rendering it into an Output on every change (see ``WidgetBase._refresh``).
    """
    try:
        return go.FigureWidget(fig)
    except ImportError:
        return go.Figure(fig)


def sync_figure(target: go.Figure, source: go.Figure) -> None:
    """Make ``target`` show ``source``: traces and layout replaced.

    Updating traces in place inside ``batch_update()`` sends "undefined" for properties that did not
    change; plotly.js's ``newPlot`` then fails on them when the widget is (re)displayed in a browser
    (seen in JupyterLab: ``Cannot use 'in' operator to search for 'line' in undefined``). Replacing
    the traces costs the transition animation and always draws.
    """
    with target.batch_update():
        target.data = ()
        target.add_traces(list(source.data))
        target.layout = source.layout


def figure_html(fig: go.Figure, include_plotlyjs: bool | str = "cdn") -> str:
    """One figure as an HTML fragment (``include_plotlyjs``: "cdn", True to embed ~3.5 MB, False)."""
    return go.Figure(fig).to_html(full_html=False, include_plotlyjs=include_plotlyjs)


class WidgetBase:
    """Subclasses set ``self.figures`` (name -> figure), build ``self.widget`` and call ``_refresh``."""

    title = "rspo widget"

    def __init__(self) -> None:
        self.errors = error_area()
        self.last_error: str | None = None
        self.figures: dict[str, go.Figure] = {}
        self._fallback_views: dict[str, W.Output] = {}
        self.widget: W.Widget = W.VBox()

    # ------------------------------------------------------------------------------ figures
    def _add_figure(self, name: str, fig: go.Figure) -> W.Widget:
        """Register a live figure under ``name``; returns the widget to place in the layout."""
        live = live_figure(fig)
        self.figures[name] = live
        if isinstance(live, W.DOMWidget):
            return live
        view = W.Output()
        self._fallback_views[name] = view
        self._render_fallback(name)
        return view

    def _render_fallback(self, name: str) -> None:
        view = self._fallback_views[name]
        view.outputs = (
            {
                "output_type": "display_data",
                "data": {
                    "text/html": figure_html(self.figures[name], include_plotlyjs="cdn"),
                    "text/plain": f"<{name} figure>",
                },
                "metadata": {},
            },
        )

    def _update_figure(self, name: str, source: go.Figure) -> None:
        sync_figure(self.figures[name], source)
        if name in self._fallback_views:
            self._render_fallback(name)

    @property
    def figure(self) -> go.Figure:
        """The main figure (the first one)."""
        return next(iter(self.figures.values()))

    # ------------------------------------------------------------------------------ display
    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def _html_parts(self) -> list[str]:
        """HTML shown above the figures in ``static_html`` (tables, summaries); none by default."""
        return []

    def _static_figures(self) -> list[go.Figure]:
        """The figures ``static_html`` draws; by default the live ones as they stand."""
        return list(self.figures.values())

    def static_html(self, include_plotlyjs: bool | str = "cdn", full_html: bool = True) -> str:
        """The widget's current state as HTML: its text parts (readable without JavaScript) and figures.

        ``include_plotlyjs="cdn"`` keeps the page small but needs internet to draw; ``True`` embeds
        plotly.js so the page works offline. ``full_html=False`` gives a fragment for a notebook cell.
        """
        parts = [f"<h3>{html.escape(self.title)}</h3>", *self._html_parts()]
        for i, fig in enumerate(self._static_figures()):
            parts.append(figure_html(fig, include_plotlyjs if i == 0 else False))
        body = "\n".join(parts)
        if not full_html:
            return f"<div>{body}</div>"
        return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n{body}\n</body></html>'


def to_html(widget: WidgetBase, include_plotlyjs: bool | str = "cdn") -> str:
    """``widget.static_html(include_plotlyjs)``: the fallback to store from a headless notebook run."""
    return widget.static_html(include_plotlyjs=include_plotlyjs)


def show(widget: WidgetBase, interactive: bool = True, include_plotlyjs: bool | str = "cdn") -> None:
    """Display the live widget, or (``interactive=False``, e.g. under papermill) its static HTML."""
    from IPython.display import HTML, display

    if interactive:
        display(widget.widget)
    else:
        display(HTML(widget.static_html(include_plotlyjs=include_plotlyjs, full_html=False)))
