"""TrainingDashboard: live training curves from the trainer's events, or a finished run's metrics.

Pass it as a callback (``train(cfg, callbacks=[dash])``) after displaying it: each ``on_update_end``,
``on_eval`` and ``on_swap`` event folds its metrics into the row of its iteration and the curves
update in place. ``TrainingDashboard.from_run(run_dir)`` draws ``metrics.jsonl`` of a run instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as W
import pandas as pd

from rspo_kit.records import RecordError, load_metrics
from rspo_kit.records.metrics import METRICS_FILE
from rspo_widgets._base import WidgetBase
from rspo_widgets._data import DASHBOARD_PANELS, ENV_STEPS, X_AXES, merge_metrics
from rspo_widgets._figures import dashboard_figure
from rspo_widgets._guard import guarded


class TrainingDashboard(WidgetBase):
    """Success, score, reward components, losses, approx KL and swap statistics against ``x``:
    ``"iteration"`` or ``"rollout/cumulative_env_steps"`` (equal env-step budgets: docs/training.md,
    "Budgets").

    ``last_swap`` keeps the latest ``on_swap`` event, ready for ``SwapInspector``.
    """

    title = "Training"

    def __init__(self, x: str = "iteration"):
        super().__init__()
        if x not in X_AXES.values():
            raise ValueError(f"x must be one of {list(X_AXES.values())}, got {x!r}")
        self.rows: dict[int, dict[str, Any]] = {}
        self.last_swap: Any = None
        self.x = W.ToggleButtons(options=list(X_AXES.items()), value=x, description="x axis")
        self.status = W.HTML()
        view = self._add_figure("curves", dashboard_figure(self.metrics, x))
        self.x.observe(self._on_x, names="value")
        self.widget = W.VBox([W.HBox([self.x, self.status]), view, self.errors])

    @classmethod
    def from_run(cls, run_dir: str | Path, x: str = "iteration") -> TrainingDashboard:
        """A dashboard of a finished (or running) run directory's ``metrics.jsonl``; ``RecordError``
        names the file (and the line) where it is damaged or holds no iterations."""
        metrics = load_metrics(run_dir)
        iterations = pd.to_numeric(metrics.get("iteration", pd.Series(dtype=float)), errors="coerce")
        if "iteration" not in metrics or iterations.isna().any():
            path = Path(run_dir) / METRICS_FILE
            raise RecordError(path, "every row needs a numeric 'iteration': not a training run's metrics log")
        return cls.from_metrics(metrics, x=x)

    @classmethod
    def from_metrics(cls, metrics: pd.DataFrame, x: str = "iteration") -> TrainingDashboard:
        """A dashboard of a metrics DataFrame (``RunResult.metrics``, ``load_metrics``)."""
        dash = cls(x=x)
        for record in metrics.to_dict("records"):
            merge_metrics(
                dash.rows, int(record["iteration"]), {k: v for k, v in record.items() if pd.notna(v)}
            )
        dash._redraw()
        return dash

    @property
    def metrics(self) -> pd.DataFrame:
        """The rows received so far, one per iteration, as ``load_metrics`` would read them."""
        if not self.rows:
            return pd.DataFrame(columns=["iteration", ENV_STEPS])
        return pd.DataFrame([self.rows[k] for k in sorted(self.rows)])

    # ------------------------------------------------------------------------ trainer events
    @guarded
    def on_update_end(self, event: Any) -> None:
        merge_metrics(self.rows, event.iteration, event.metrics)
        self._redraw()

    @guarded
    def on_eval(self, event: Any) -> None:
        merge_metrics(self.rows, event.iteration, event.metrics)
        self._redraw()

    @guarded
    def on_swap(self, event: Any) -> None:
        self.last_swap = event
        merge_metrics(self.rows, event.iteration, event.metrics)
        # no redraw: on_update_end of the same iteration follows at once with the full row

    @guarded
    def _on_x(self, _change) -> None:
        self._redraw()

    def _redraw(self) -> None:
        frame = self.metrics
        self._update_figure("curves", dashboard_figure(frame, self.x.value))
        last = self.rows[max(self.rows)] if self.rows else {}
        parts = [f"iteration {last.get('iteration', '–')}"]
        for key, label in (
            ("rollout/success", "success"),
            ("eval/success", "eval"),
            (ENV_STEPS, "env steps"),
        ):
            if isinstance(last.get(key), int | float):
                parts.append(f"{label} {last[key]:.3g}")
        self.status.value = " · ".join(parts)

    def _html_parts(self) -> list[str]:
        frame = self.metrics
        columns = [
            c for c in ["iteration", ENV_STEPS, *[m for _, ms in DASHBOARD_PANELS for m in ms]] if c in frame
        ]
        return [frame[columns].to_html(index=False, float_format=lambda v: f"{v:.3g}", border=0, na_rep="")]
