"""The learned progress model beside the hand-written dense reward, as numbers and as a figure.

``comparison_summary`` says, per signal, how its trajectory return agrees with the outcome;
``comparison_figure`` draws each trajectory's running return under both. Both read the table of
``rspo_kit.rewards.progress_model.step_comparison``; notebook 05 shows them headless, and
``rspo_widgets.ProgressModelView`` draws the figure a group at a time.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rspo_kit.rewards import rank_agreement, roc_auc

WON, FAILED = "#2ca02c", "#8c8c8c"  # rspo_widgets' colours of a won and a failed trajectory

SIGNALS = {"learned": "learned r̂ (progress model)", "handwritten": "hand-written"}


def comparison_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per signal (learned, hand-written): how its trajectory return agrees with the outcome.

    ``kendall_tau``: mean within-group τ-b of return against outcome (``rank_agreement``); ``auc_success``:
    AUC of the return for success; ``mean_return_won`` / ``_failed``; ``rewarded_failure``: share of
    steps of failed trajectories that it pays (> 0). ``table``: ``progress_model.step_comparison``.
    """
    last = table.groupby("traj_id", sort=False).tail(1)
    rows = []
    for signal, label in SIGNALS.items():
        returns = last[f"{signal}_return"].to_numpy(dtype=float)
        if np.isnan(returns).all():
            continue
        won = last["won"].to_numpy(dtype=bool)
        ra = rank_agreement(returns, last["outcome"].to_numpy(dtype=float), last["group_id"].tolist())
        failed_steps = table.loc[~table["won"], signal]
        rows.append(
            {
                "signal": label,
                "kendall_tau": ra.mean_tau,
                "tau_groups": ra.n_groups - ra.n_undefined,
                "auc_success": roc_auc(returns, won),
                "mean_return_won": float(returns[won].mean()) if won.any() else math.nan,
                "mean_return_failed": float(returns[~won].mean()) if (~won).any() else math.nan,
                "rewarded_failure": float((failed_steps > 0).mean()) if len(failed_steps) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def comparison_figure(table: pd.DataFrame, group: str | None = None) -> go.Figure:
    """Running return of each trajectory of ``group`` (None: all) under the learned progress model
    (left) and the hand-written reward (right): green won (a star at its last step), grey failed."""
    rows = table if group is None else table[table["group_id"] == group]
    fig = make_subplots(rows=1, cols=2, subplot_titles=list(SIGNALS.values()), shared_xaxes=True)
    for col, signal in enumerate(SIGNALS, start=1):
        for t, steps in rows.groupby("traj_id", sort=False):
            won = bool(steps["won"].iloc[0])
            fig.add_scatter(
                x=steps["step"].tolist(),
                y=steps[f"{signal}_return"].tolist(),
                mode="lines+markers",
                line={"color": WON if won else FAILED},
                name=f"#{t} {'won' if won else 'failed'} (R = {steps['outcome'].iloc[0]:.2f})",
                legendgroup=str(t),
                showlegend=col == 1,
                hovertext=[
                    f"step {s}: {html.escape(str(a))}<br>r = {r:.3f}, so far {c:.3f}"
                    for s, a, r, c in zip(
                        steps["step"], steps["action"], steps[signal], steps[f"{signal}_return"], strict=True
                    )
                ],
                hoverinfo="text",
                row=1,
                col=col,
            )
            if won:
                fig.add_scatter(
                    x=[steps["step"].iloc[-1]],
                    y=[steps[f"{signal}_return"].iloc[-1]],
                    mode="markers",
                    marker={"symbol": "star", "size": 14, "color": WON},
                    showlegend=False,
                    hoverinfo="skip",
                    row=1,
                    col=col,
                )
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="return so far", col=1)
    fig.update_layout(
        title=f"Learned vs hand-written dense reward — {group or 'all groups'}", height=380, margin={"t": 60}
    )
    return fig
