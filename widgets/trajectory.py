"""TrajectoryViewer: one group (task) of trajectories side by side, step by step."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
import pandas as pd

from rspo_widgets._base import WidgetBase
from rspo_widgets._data import OUTCOME_FILTERS, SOURCES, Scorer, filter_steps, step_frame, token_probs
from rspo_widgets._figures import trajectory_figure, trajectory_label
from rspo_widgets._guard import guarded

ALL = "all"


def _prob_color(p: float) -> str:
    """Green for likely tokens, red for unlikely ones (background of a per-token probability)."""
    return f"hsl({int(120 * max(0.0, min(1.0, p)))}, 70%, 85%)"


class TrajectoryViewer(WidgetBase):
    """Browse the trajectories of one group: per step the prompt, action and probability, the env's
    progress, process and outcome reward, and advantage.

    ``trajectories``: ``Trajectory`` objects (e.g. an ``on_rollout_end`` event's, or an update batch's
    ``trajs``). ``tokenizer`` decodes prompts and tokens (``policy.tokenizer``); ``advantages`` is
    flat per step over ``trajectories`` (``batch_advantages(batch, cfg)``); ``process`` a process reward
    callable or a ``RewardModel`` (which also gives R_o; without one R_o = 1[won]).
    """

    title = "Trajectories"

    def __init__(
        self,
        trajectories: Sequence[Any],
        tokenizer: Any = None,
        advantages: Any = None,
        process: Scorer = None,
    ):
        super().__init__()
        self.trajectories = list(trajectories)
        if not self.trajectories:
            raise ValueError("TrajectoryViewer needs at least one trajectory")
        self.tokenizer = tokenizer
        self.frame = step_frame(self.trajectories, process=process, advantages=advantages)
        self._has_process = process is not None
        self._has_advantage = advantages is not None
        groups = list(dict.fromkeys(t.group_id for t in self.trajectories))

        self.group = W.Dropdown(options=groups, value=groups[0], description="group")
        self.outcome = W.ToggleButtons(options=list(OUTCOME_FILTERS), value="all", description="outcome")
        self.source = W.ToggleButtons(options=[ALL, *SOURCES], value=ALL, description="source")
        self.invalid_only = W.Checkbox(value=False, description="invalid steps only")
        self.summary = W.HTML()
        self.steps = W.HTML()
        view = self._add_figure("steps", self._figure(self.shown()))
        for control in (self.group, self.outcome, self.source, self.invalid_only):
            control.observe(self._on_filter, names="value")
        self.widget = W.VBox(
            [
                W.HBox([self.group, self.invalid_only]),
                self.outcome,
                self.source,
                self.summary,
                view,
                self.steps,
                self.errors,
            ]
        )
        self._redraw()

    def shown(self) -> pd.DataFrame:
        """The step rows the current group and filters select."""
        rows = self.frame[self.frame["group_id"] == self.group.value]
        return filter_steps(
            rows,
            outcome=self.outcome.value,
            sources=None if self.source.value == ALL else [self.source.value],
            invalid_only=self.invalid_only.value,
        )

    @guarded
    def _on_filter(self, _change) -> None:
        self._redraw()

    def _figure(self, rows: pd.DataFrame):
        # invalid-only keeps the trajectories that have an invalid step, drawn whole for context
        whole = self.frame[self.frame["traj"].isin(rows["traj"].unique())]
        return trajectory_figure(whole, process=self._has_process, advantage=self._has_advantage)

    def _redraw(self) -> None:
        rows = self.shown()
        self._update_figure("steps", self._figure(rows))
        group = self.frame[self.frame["group_id"] == self.group.value]
        firsts = group.drop_duplicates("traj")
        self.summary.value = (
            f"<b>{html.escape(str(self.group.value))}</b>: {len(firsts)} trajectories "
            f"({int(firsts['won'].sum())} won), {len(group)} steps, "
            f"{int((~group['valid']).sum())} invalid · showing {rows['traj'].nunique()} trajectories"
        )
        self.steps.value = self.steps_html(rows)

    # ----------------------------------------------------------------------------------- table
    def steps_html(self, rows: pd.DataFrame) -> str:
        """Trajectories as columns, steps as rows; each cell holds the step's action and its numbers."""
        trajs = list(dict.fromkeys(rows["traj"]))
        if not trajs:
            return "<p><i>no trajectory matches the filters</i></p>"
        by_cell = {(r.traj, r.step): r for r in rows.itertuples(index=False)}
        header = "".join(self._header(t) for t in trajs)
        body = []
        for step in sorted(rows["step"].unique()):
            cells = "".join(self._cell(by_cell.get((t, step)), t) for t in trajs)
            body.append(f"<tr><th style='vertical-align:top'>{step}</th>{cells}</tr>")
        return (
            "<div style='overflow-x:auto'><table style='border-collapse:collapse;font-size:12px'>"
            f"<tr><th>step</th>{header}</tr>{''.join(body)}</table></div>"
        )

    def _header(self, traj: int) -> str:
        first = self.frame[self.frame["traj"] == traj].iloc[0]
        t = self.trajectories[traj]
        color = "#2ca02c" if first["won"] else "#8c8c8c"
        return (
            f"<th style='border-bottom:3px solid {color};min-width:180px;text-align:left'>"
            f"{html.escape(trajectory_label(first))}<br><span style='font-weight:normal'>"
            f"R_o={first['outcome']:g} · score {first['score']:g} · {len(t.steps)} steps</span></th>"
        )

    def _cell(self, row: Any, traj: int) -> str:
        if row is None:
            return "<td style='color:#bbb;vertical-align:top'>·</td>"
        step = self.trajectories[traj].steps[row.step]
        background = "#fde0dd" if not row.valid else "white"
        tokens = token_probs(step, self.tokenizer)
        token_html = "".join(
            f"<span title='p={p:.3f}' style='background:{_prob_color(p)}'>{html.escape(text)}</span>"
            for text, p in tokens
        )
        parts = [
            f"<b>{html.escape(row.action)}</b> p={row.prob:.3f}" + ("" if row.valid else " <b>INVALID</b>"),
            f"<div>{token_html}</div>" if token_html else "",
            f"<span style='color:#555'>{html.escape(row.progress)}</span>",
        ]
        numbers = []
        if not math.isnan(row.process_reward):
            numbers.append(f"r_p={row.process_reward:.3f}")
        if row.step == row.n_steps - 1:
            numbers.append(f"R_o={row.outcome:g}")
        if not math.isnan(row.advantage):
            numbers.append(f"A={row.advantage:+.3f}")
        parts.append(" · ".join(numbers))
        if self.tokenizer is not None:
            prompt = self.tokenizer.decode(step.prompt_ids)
            parts.append(
                f"<details><summary>prompt</summary><pre style='white-space:pre-wrap;font-size:11px'>"
                f"{html.escape(prompt)}</pre></details>"
            )
        content = "<br>".join(p for p in parts if p)
        return f"<td style='vertical-align:top;border:1px solid #ddd;padding:4px;background:{background}'>{content}</td>"

    def _html_parts(self) -> list[str]:
        return [self.summary.value, self.steps.value]
