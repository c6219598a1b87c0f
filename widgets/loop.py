"""LoopInspector: one loop of the paper's RSPO (Algorithm 1) as three pictures.

1. B's k dense steps: its dense return and success at each rollout, then at the collection: does the
   dense reward rise, and does the outcome follow it?
2. The swap: each collection trajectory's dense return (what B chased) against its outcome (the label
   A sees), the ones reward-based sampling drew for A marked;
3. The shifted clip: for one replayed step, PPO's window [1 − ε, 1 + ε] and GePPO's [c − ε, c + ε] around
   c = π_old/π_B on the ratio π_θ/π_B: the window sits where A stood before its update.

It reads the loop's record (``on_swap``'s or ``on_update_end``'s ``record``) and an updated batch of A
(``on_update_end``'s ``batch``), never trainer internals.
"""

from __future__ import annotations

import random
from typing import Any

import ipywidgets as W
import plotly.graph_objects as go

from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.views import clip_windows, explorer_steps, relabel_table
from rspo_widgets._base import WidgetBase
from rspo_widgets._guard import guarded

EXPLANATION = (
    "<p style='max-width:60em'>One loop of RSPO: ① B ← A, then B takes k steps on the "
    "<span style='color:#ff7f0e'>dense reward</span>; ② B's collection is relabelled with the "
    "<span style='color:#1f77b4'>outcome</span> and stored with its advantage; ③ A takes k steps on fresh "
    "on-policy tasks plus the trajectories drawn from the buffer (highest outcome first), whose ratio "
    "π<sub>θ</sub>/π<sub>B</sub> is clipped around π<sub>old</sub>/π<sub>B</sub>; ④ the buffer is emptied.</p>"
)


def explorer_figure(record: Any, rewards: RewardModel) -> go.Figure:
    """B's mean dense return (left axis) and success (right axis) per rollout of the loop."""
    steps = explorer_steps(record, rewards)
    fig = go.Figure()
    fig.add_scatter(
        x=steps["rollout"], y=steps["dense_return"], name="dense return", line={"color": "#ff7f0e"}
    )
    fig.add_scatter(
        x=steps["rollout"], y=steps["success"], name="success", yaxis="y2", line={"color": "#1f77b4"}
    )
    fig.update_layout(
        title="① B's k dense steps, then its collection",
        yaxis={"title": "mean dense return"},
        yaxis2={"title": "success", "overlaying": "y", "side": "right", "range": [0, 1]},
        height=320,
        margin={"t": 50, "b": 40},
    )
    return fig


def relabel_figure(record: Any, rewards: RewardModel) -> go.Figure:
    """The collection: dense return against outcome (jittered), drawn for A or not."""
    table = relabel_table(record, rewards)
    jitter = random.Random(0)
    fig = go.Figure()
    for drawn, name, color in ((False, "stored only", "#aaaaaa"), (True, "drawn for A", "#1f77b4")):
        part = table[(table["drawn_by"] > 0) == drawn]
        fig.add_scatter(
            x=part["dense_return"],
            y=[o + jitter.uniform(-0.04, 0.04) for o in part["outcome"]],
            mode="markers",
            name=name,
            marker={"color": color, "size": 8},
            text=[
                f"{t}<br>A_off {a:.2f}<br>step {d}"
                for t, a, d in zip(part["task_id"], part["advantage"], part["drawn_by"], strict=True)
            ],
            hovertemplate="%{text}<extra></extra>",
        )
    fig.update_layout(
        title="② the swap: what B chased (dense) and the label A sees (outcome)",
        xaxis={"title": "dense return (B's reward)"},
        yaxis={"title": "outcome after the swap"},
        height=320,
        margin={"t": 50, "b": 40},
    )
    return fig


def clip_figure(windows: Any, row: int, clip_low: float, clip_high: float) -> go.Figure:
    """PPO's window and the shifted one for replayed step ``row`` of ``clip_windows``' table."""
    w = windows.iloc[row]
    fig = go.Figure()
    fig.add_scatter(
        x=[1 - clip_low, 1 + clip_high],
        y=["PPO: around 1"] * 2,
        mode="lines+markers",
        line={"width": 8, "color": "#aaaaaa"},
        name="[1 − ε, 1 + ε]",
    )
    fig.add_scatter(
        x=[w["low"], w["high"]],
        y=["GePPO: around π_old/π_B"] * 2,
        mode="lines+markers",
        line={"width": 8, "color": "#1f77b4"},
        name="[c − ε, c + ε]",
    )
    fig.add_scatter(
        x=[w["center"]],
        y=["GePPO: around π_old/π_B"],
        mode="markers",
        name="c = π_old/π_B",
        marker={"symbol": "diamond", "size": 14, "color": "#d62728"},
    )
    fig.update_layout(
        title=f"③ {w['action']!r}: π_B {w['pi_B']:.3f}, π_old {w['pi_old']:.3f}",
        xaxis={"title": "ratio π_θ / π_B"},
        height=260,
        margin={"t": 50, "b": 40},
        showlegend=False,
    )
    return fig


class LoopInspector(WidgetBase):
    """One loop's record and one of A's updated batches (``on_update_end``'s ``record`` and ``batch``)."""

    title = "One loop of RSPO"

    def __init__(
        self, record: Any, batch: Any, rewards: RewardModel, clip_low: float = 0.2, clip_high: float = 0.2
    ):
        super().__init__()
        self.record, self.rewards, self.clip = record, rewards, (clip_low, clip_high)
        self.windows = clip_windows(batch, clip_low, clip_high)
        views = [
            self._add_figure("explorer", explorer_figure(record, rewards)),
            self._add_figure("relabel", relabel_figure(record, rewards)),
        ]
        controls: list[W.Widget] = []
        if len(self.windows):
            options = [
                (f"{r.trajectory}/{r.step}: {r.action}", i) for i, r in enumerate(self.windows.itertuples())
            ]
            self.step = W.Dropdown(options=options, value=0, description="replayed step")
            self.step.observe(self._on_step, names="value")
            controls = [self.step]
            views.append(self._add_figure("clip", clip_figure(self.windows, 0, *self.clip)))
        self.widget = W.VBox([W.HTML(EXPLANATION), *views[:2], *controls, *views[2:], self.errors])

    @guarded
    def _on_step(self, change: dict) -> None:
        self._update_figure("clip", clip_figure(self.windows, change["new"], *self.clip))
