"""AdvantageHeatmap: the advantage of every step of an update batch, trajectories by steps.

With GiGPO, a step's advantage is its trajectory's episode advantage plus a step advantage relative
to the other steps of the same task group taken from the same state (its *anchor group*); hovering a
cell shows that group and its size — size 1 means no step baseline, only the episode term.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from rspo_kit.train.update import UpdateBatch
from rspo_widgets._base import WidgetBase
from rspo_widgets._data import advantage_frame
from rspo_widgets._figures import advantage_heatmap
from rspo_widgets._guard import guarded

ALL = "all"


class AdvantageHeatmap(WidgetBase):
    """``batch``: an ``UpdateBatch`` (an ``on_update_end`` event's ``data["batch"]``); ``algo_cfg``: the
    ``AlgoConfig`` whose estimator to show (``cfg.algo``). An event's batch under its own run's config
    shows the advantages its update used (PPO's over its critic); otherwise they are recomputed (PPO
    without a critic: returns-to-go)."""

    title = "Step advantages"

    def __init__(self, batch: UpdateBatch, algo_cfg: Any):
        super().__init__()
        self.algo_cfg = algo_cfg
        self.frame = advantage_frame(batch, algo_cfg)
        if self.frame.empty:
            raise ValueError("the batch has no steps")
        groups = list(dict.fromkeys(self.frame["group_id"]))
        self.group = W.Dropdown(options=[ALL, *groups], value=groups[0], description="group")
        self.stats = W.HTML(self._stats_html())
        view = self._add_figure("heatmap", self._figure())
        self.group.observe(self._on_group, names="value")
        self.widget = W.VBox([self.group, self.stats, view, self.errors])

    def _selected(self) -> str | None:
        return None if self.group.value == ALL else self.group.value

    def _figure(self):
        name = getattr(self.algo_cfg, "name", "")
        return advantage_heatmap(
            self.frame,
            group=self._selected(),
            title=f"{name.upper()} step advantages — {self.group.value}",
        )

    def _stats_html(self) -> str:
        rows = (
            self.frame if self._selected() is None else self.frame[self.frame["group_id"] == self._selected()]
        )
        shared = float((rows["anchor_group_size"] > 1).mean()) if len(rows) else 0.0
        return (
            f"{rows['traj'].nunique()} trajectories, {len(rows)} steps · "
            f"{shared:.0%} of steps share their anchor state with another step of the group "
            f"({rows['anchor_group'].nunique()} anchor groups)"
        )

    @guarded
    def _on_group(self, _change) -> None:
        self.stats.value = self._stats_html()
        self._update_figure("heatmap", self._figure())

    def _html_parts(self) -> list[str]:
        return [f"<p>{self.stats.value}</p>"]
