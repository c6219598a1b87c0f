"""Tables to plotly figures: pure functions, one per picture (no ipywidgets here).

Each returns a fresh ``go.Figure``; widgets copy it into their live FigureWidget with
``sync_figure``, which updates traces in place when the figure keeps its shape.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rspo_widgets._data import DASHBOARD_PANELS, SwapTables, hacked_trajectories, metric_series

WON, FAILED, HACKED = "#2ca02c", "#8c8c8c", "#d62728"
SOURCE_COLORS = {"actor": "#1f77b4", "explorer": "#ff7f0e", "replay": "#9467bd"}
PROCESS_COLOR, OUTCOME_COLOR = "#ff7f0e", "#1f77b4"
COMPONENT_COLORS = ("#1f77b4", "#ff7f0e", "#9467bd", "#17becf", "#bcbd22", "#e377c2")


def _nice(value: float, digits: int = 2) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


# ------------------------------------------------------------------------------------- playground
def timeline_figure(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    """Each process-reward component per step as bars, their running total as a line, invalid steps as ✗.

    ``rows`` are ``playground_row`` dicts in step order (step 1 first).
    """
    steps = list(range(1, len(rows) + 1))
    fig = go.Figure()
    for k, name in enumerate(names):
        fig.add_bar(
            x=steps,
            y=[r[f"reward/{name}"] for r in rows],
            name=name,
            marker_color=COMPONENT_COLORS[k % len(COMPONENT_COLORS)],
            customdata=[r["action"] for r in rows],
            hovertemplate="step %{x}: %{customdata}<br>" + name + " %{y:.3f}<extra></extra>",
        )
    running, total = [], 0.0
    for r in rows:
        total += r["reward/total"]
        running.append(total)
    fig.add_scatter(x=steps, y=running, name="return so far (sum)", mode="lines+markers", line_color="black")
    invalid = [(s, 0.0) for s, r in zip(steps, rows, strict=True) if not r["valid"]]
    fig.add_scatter(
        x=[s for s, _ in invalid],
        y=[y for _, y in invalid],
        name="invalid action",
        mode="markers",
        marker={"symbol": "x", "size": 11, "color": HACKED},
    )
    fig.update_layout(
        title="Process reward per step (bars) and their running sum",
        barmode="group",
        xaxis_title="step",
        yaxis_title="reward",
        height=320,
        margin={"t": 50, "b": 40},
    )
    return fig


# ------------------------------------------------------------------------------------ trajectories
def trajectory_label(first: Mapping[str, Any]) -> str:
    """``#3 explorer ✓`` for a trajectory's first row of a step frame."""
    return f"#{first['traj']} {first['source']} {'✓' if first['won'] else '✗'}"


def trajectory_figure(frame: pd.DataFrame, *, process: bool, advantage: bool) -> go.Figure:
    """Per step and trajectory: the action's probability, the process return so far, the advantage.

    One line per trajectory in each panel; green lines won, grey failed; ✗ marks invalid steps.
    """
    panels = [("action probability", "prob")]
    if process:
        panels.append(("process return so far", "process_return_so_far"))
    if advantage:
        panels.append(("advantage", "advantage"))
    fig = make_subplots(
        rows=len(panels),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[p[0] for p in panels],
        vertical_spacing=0.08,
    )
    for traj, rows in frame.groupby("traj", sort=True):
        first = rows.iloc[0]
        label = trajectory_label(first)
        color = WON if first["won"] else FAILED
        hover = [
            f"{label} step {s}: {html.escape(a)}<br>p={p:.3f} valid={v}<br>r_p={_nice(r)} A={_nice(adv)}"
            for s, a, p, v, r, adv in zip(
                rows["step"],
                rows["action"],
                rows["prob"],
                rows["valid"],
                rows["process_reward"],
                rows["advantage"],
                strict=True,
            )
        ]
        symbols = ["circle" if v else "x" for v in rows["valid"]]
        for k, (_, column) in enumerate(panels, start=1):
            fig.add_scatter(
                x=rows["step"].tolist(),
                y=rows[column].tolist(),
                mode="lines+markers",
                name=label,
                legendgroup=label,
                showlegend=k == 1,
                line={"color": color, "dash": "solid" if first["source"] == "actor" else "dot"},
                marker={"symbol": symbols, "size": 8},
                hovertext=hover,
                hoverinfo="text",
                meta=int(traj),
                row=k,
                col=1,
            )
    fig.update_xaxes(title_text="step", row=len(panels), col=1)
    fig.update_layout(height=220 * len(panels) + 60, margin={"t": 40, "b": 40}, legend_title="trajectory")
    return fig


# ------------------------------------------------------------------------------------ misalignment
def _group_label(group: str, tau: float) -> str:
    return f"{group} (τ={_nice(tau)})"


def misalignment_scatter(diag: Any, *, group: str | None = None, eps: float | None = None) -> go.Figure:
    """Process return (y) against outcome (x) per trajectory, one colour per group, Kendall τ named.

    Within each outcome column the groups stand side by side. Hacking cases — top quartile of process
    return yet failed — get a red ring; the dashed line is the top-quartile threshold.
    """
    trajs = diag.trajectories.copy()
    trajs["hacked"] = hacked_trajectories(trajs, diag.hacking.threshold)
    taus = diag.rank_agreement.per_group
    groups = list(dict.fromkeys(trajs["group_id"]))
    shown = [g for g in groups if group in (None, g)]
    fig = go.Figure()
    width = 0.5 / max(1, len(shown))
    for k, g in enumerate(shown):
        rows = trajs[trajs["group_id"] == g]
        offset = (k - (len(shown) - 1) / 2) * width
        fig.add_scatter(
            x=(rows["outcome"] + offset).tolist(),
            y=rows["process_return"].tolist(),
            mode="markers",
            name=_group_label(g, taus.get(g, math.nan)),
            marker={
                "size": 11,
                "color": COMPONENT_COLORS[k % len(COMPONENT_COLORS)],
                "symbol": ["circle" if s else "circle-open" for s in rows["succeeded"]],
                "line": {
                    "width": [3 if h else 1 for h in rows["hacked"]],
                    "color": [HACKED if h else "black" for h in rows["hacked"]],
                },
            },
            hovertext=[
                f"{g} traj {t}<br>process return {p:.3f}<br>outcome {o:g}{' — HACKED' if h else ''}"
                for t, p, o, h in zip(
                    rows["traj_id"], rows["process_return"], rows["outcome"], rows["hacked"], strict=True
                )
            ],
            hoverinfo="text",
        )
    threshold = diag.hacking.threshold
    fig.add_scatter(
        x=[trajs["outcome"].min() - 0.4, trajs["outcome"].max() + 0.4] if len(trajs) else [],
        y=[threshold, threshold] if len(trajs) else [],
        mode="lines",
        name="top-quartile threshold",
        line={"dash": "dash", "color": HACKED, "width": 1},
        hoverinfo="skip",
    )
    if group is None:
        tau_text = f"mean Kendall τ = {_nice(diag.rank_agreement.mean_tau)} over {diag.rank_agreement.n_groups} groups"
    else:
        tau_text = f"{group}: Kendall τ = {_nice(taus.get(group, math.nan))}"
    n_hacked = int(trajs["hacked"].sum())
    eps_text = "" if eps is None else f"eps={eps:.2f} · "
    fig.update_layout(
        title=(
            f"{eps_text}Process return vs outcome — {tau_text}<br>"
            f"<sup>hacking: {n_hacked} top-quartile trajectories failed "
            f"(rate {_nice(diag.hacking.rate)}); red ring = hacked, open = failed</sup>"
        ),
        xaxis_title="outcome R_o (groups side by side)",
        yaxis_title="process return Σ r_p",
        height=420,
        margin={"t": 80},
    )
    outcomes = set(trajs["outcome"].round(9))
    if outcomes <= {0.0, 1.0}:
        fig.update_xaxes(tickvals=[0, 1], ticktext=["failed (0)", "won (1)"], range=[-0.6, 1.6])
    return fig


def disagreement_figure(diag: Any) -> go.Figure:
    """Share of steps at each step index whose process reward disagrees with the outcome, by kind."""
    by_step = diag.disagreement_by_step
    fig = go.Figure()
    for kind, color, text in (
        ("rewarded_failure", HACKED, "rewarded (r_p > 0) on a failed trajectory"),
        ("unrewarded_success", OUTCOME_COLOR, "unrewarded (r_p ≤ 0) on a won trajectory"),
    ):
        fig.add_bar(
            x=by_step.index.tolist(),
            y=by_step[kind].tolist(),
            name=text,
            marker_color=color,
            customdata=by_step["n_steps"].tolist(),
            hovertemplate="step %{x}: %{y:.0%} of %{customdata} steps<extra></extra>",
        )
    fig.update_layout(
        title="Per-step disagreement between process reward and outcome",
        barmode="stack",
        xaxis_title="step",
        yaxis={"title": "share of steps", "tickformat": ".0%", "range": [0, 1]},
        height=320,
        margin={"t": 50},
    )
    return fig


def reward_timeline_figure(frame: pd.DataFrame, diag: Any, *, group: str | None = None) -> go.Figure:
    """Running process return per trajectory over its steps, with its outcome at the end.

    Green won, grey failed, red dashed hacked (top-quartile process return, failed); a star at the last
    step marks a success. ``group=None`` shows every group.
    """
    trajs = diag.trajectories.copy()
    trajs["hacked"] = hacked_trajectories(trajs, diag.hacking.threshold)
    flags = trajs.set_index(["group_id", "traj_id"])
    rows = frame if group is None else frame[frame["group_id"] == group]
    fig = go.Figure()
    for (g, t), steps in rows.groupby(["group_id", "traj_id"], sort=False):
        steps = steps.sort_values("step")
        hacked = bool(flags.loc[(g, t), "hacked"])
        won = bool(steps["won"].iloc[0])
        color = HACKED if hacked else (WON if won else FAILED)
        running = steps["process_reward"].cumsum().tolist()
        fig.add_scatter(
            x=steps["step"].tolist(),
            y=running,
            mode="lines+markers",
            name=f"{g} #{t} {'won' if won else 'failed'}{' · hacked' if hacked else ''}",
            line={"color": color, "dash": "dash" if hacked else "solid"},
            marker={"symbol": ["circle" if v else "x" for v in steps["valid"]], "size": 7},
            hovertext=[
                f"step {s}: {html.escape(a)}<br>r_p={r:.3f}, so far {c:.3f}"
                for s, a, r, c in zip(
                    steps["step"], steps["action"], steps["process_reward"], running, strict=True
                )
            ],
            hoverinfo="text",
        )
        if won:
            fig.add_scatter(
                x=[steps["step"].iloc[-1]],
                y=[running[-1]],
                mode="markers",
                marker={"symbol": "star", "size": 16, "color": WON},
                showlegend=False,
                hoverinfo="skip",
            )
    tau = diag.rank_agreement.per_group.get(group, math.nan) if group else diag.rank_agreement.mean_tau
    fig.update_layout(
        title=f"Process return over the episode — {group or 'all groups'} (Kendall τ = {_nice(tau)})",
        xaxis_title="step",
        yaxis_title="process return so far",
        height=360,
        margin={"t": 50},
    )
    return fig


# ----------------------------------------------------------------------------------- advantages
def advantage_heatmap(
    frame: pd.DataFrame, *, group: str | None = None, title: str | None = None
) -> go.Figure:
    """Trajectories (rows) × steps (columns), colour = advantage (blue up, red down, white 0).

    Hover shows the action, reward, and the GiGPO anchor group with its size (1: no step baseline).
    ``frame`` is an ``advantage_frame``.
    """
    rows = frame if group is None else frame[frame["group_id"] == group]
    trajs = list(dict.fromkeys(rows["traj"]))
    n_steps = int(rows["step"].max()) + 1 if len(rows) else 0
    z = [[None] * n_steps for _ in trajs]
    text = [[""] * n_steps for _ in trajs]
    labels = []
    for r, traj in enumerate(trajs):
        steps = rows[rows["traj"] == traj]
        first = steps.iloc[0]
        tag = "replay" if first["offpolicy"] else first["source"]
        labels.append(
            f"#{traj} {tag} {'✓' if first['won'] else '✗'}" + ("" if group else f" · {first['group_id']}")
        )
        for _, s in steps.iterrows():
            c = int(s["step"])
            z[r][c] = s["advantage"]
            text[r][c] = (
                f"{html.escape(str(s['action']))}<br>A={s['advantage']:.3f} reward={s['reward']:.3f}"
                f"<br>anchor group {html.escape(str(s['anchor_group']))} (size {s['anchor_group_size']})"
            )
    limit = max([abs(v) for row in z for v in row if v is not None] + [1e-6])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(n_steps)),
            y=labels,
            text=text,
            hovertemplate="%{y} step %{x}<br>%{text}<extra></extra>",
            colorscale="RdBu",
            zmid=0.0,
            zmin=-limit,
            zmax=limit,
            colorbar={"title": "advantage"},
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        title=title or f"Step advantages — {group or 'all groups'}",
        xaxis_title="step",
        yaxis={"autorange": "reversed"},
        height=max(260, 26 * len(trajs) + 120),
        margin={"t": 50, "l": 10},
    )
    return fig


# ------------------------------------------------------------------------------------------- swap
SWAP_TITLES = (
    "① actor A's group<br>R_o (on-policy)",
    "② explorer B's trajectories<br>label before → after the swap",
    "③ replay buffer<br>R_o (outcome labels)",
    "④ mixed group for A<br>mean advantage",
)


def _won_mark(won: bool) -> str:
    return "✓" if won else "✗"


def _add_outcome_bars(fig: go.Figure, members: pd.DataFrame, labels: list[str], col: int, **style) -> None:
    """One bar per member in panel ``col``: its outcome R_o, coloured by whether it won; no legend."""
    fig.add_bar(
        x=labels,
        y=members["outcome"].tolist(),
        marker_color=[WON if w else FAILED for w in members["won"]],
        showlegend=False,
        row=1,
        col=col,
        **style,
    )


def swap_figure(tables: SwapTables, task: str) -> go.Figure:
    """The four stages of one task's swap side by side (RSPO steps 1, 3, 4, 5)."""
    m = tables.members[tables.members["task_id"] == task]
    summary = tables.summary.set_index("task_id").loc[task]
    fig = make_subplots(rows=1, cols=4, subplot_titles=SWAP_TITLES, horizontal_spacing=0.07)

    actor = m[m["panel"] == "actor"]
    _add_outcome_bars(
        fig,
        actor,
        [f"A{k} {_won_mark(w)}" for k, w in zip(actor["member"], actor["won"], strict=True)],
        col=1,
        text=[f"R_o={o:g}" for o in actor["outcome"]],  # a row of zeros draws no bars: say so
        textposition="outside",
        name="actor outcome",
        hovertemplate="%{x}: R_o=%{y:.2f}<extra></extra>",
    )

    explorer = m[m["panel"] == "explorer"]
    names = [
        f"B{k} {_won_mark(w)}{' →buf' if a else ''}"
        for k, w, a in zip(explorer["member"], explorer["won"], explorer["admitted"], strict=True)
    ]
    for column, name, color in (
        ("process_return", "before swap: process return (what B trained on)", PROCESS_COLOR),
        ("outcome", "after swap: outcome R_o (what A sees)", OUTCOME_COLOR),
    ):
        fig.add_bar(x=names, y=explorer[column].tolist(), name=name, marker_color=color, row=1, col=2)

    buffer = m[m["panel"] == "buffer"]
    _add_outcome_bars(
        fig,
        buffer,
        [
            f"it{g.rsplit('@', 1)[-1]} #{k} {_won_mark(w)}{' →mixed' if r else ''}"
            for k, g, w, r in zip(
                buffer["member"], buffer["group_id"], buffer["won"], buffer["replayed"], strict=True
            )
        ],
        col=3,
        marker_line={"color": "black", "width": [2 if r else 0 for r in buffer["replayed"]]},
        name="buffer outcome",
        hovertemplate="%{x} (sampled at that iteration): R_o=%{y:.2f}<extra></extra>",
    )

    mixed = m[m["panel"] == "mixed"]
    fig.add_bar(
        x=[
            f"{'R' if off else 'A'}{k} {_won_mark(w)}"
            for k, off, w in zip(mixed["member"], mixed["offpolicy"], mixed["won"], strict=True)
        ],
        y=mixed["advantage"].tolist(),
        text=[f"R_o={o:g}" for o in mixed["outcome"]],
        textposition="outside",
        marker_color=[
            SOURCE_COLORS["replay"] if off else SOURCE_COLORS["actor"] for off in mixed["offpolicy"]
        ],
        name="④ advantage of A's own (blue) and replayed (purple) trajectories",
        hovertemplate="%{x}: mean advantage %{y:.3f}<extra></extra>",
        row=1,
        col=4,
    )
    if summary["rescued"]:
        verdict = "RESCUED — the actor's own group had no outcome variance (no signal); replay gave it one"
        color = WON
    elif summary["actor_zero_var"]:
        verdict = (
            "still no signal — the actor's group had no outcome variance and nothing useful was replayed"
        )
        color = HACKED
    else:
        verdict = "the actor's own group already had outcome variance"
        color = "black"
    prefix = f"iteration {tables.iteration} · " if tables.iteration is not None else ""
    fig.update_layout(
        title={"text": f"{prefix}{task}: <span style='color:{color}'>{verdict}</span>", "font": {"size": 14}},
        barmode="group",
        height=430,
        width=1120,  # four panels side by side: plotly's default 700 px overlaps their titles
        margin={"t": 110, "b": 60},
        legend={"orientation": "h", "y": -0.25},
    )
    outcomes = m[m["panel"].isin(["actor", "buffer"])]["outcome"]
    low, high = min(0.0, *outcomes, 0.0) - 0.1, max(1.0, *outcomes, 1.0) + 0.25
    fig.update_yaxes(title_text="R_o", range=[low, high], row=1, col=1)
    fig.update_yaxes(range=[low, high], row=1, col=3)
    fig.update_yaxes(title_text="advantage", row=1, col=4)
    if summary["actor_zero_var"]:
        fig.add_annotation(
            text="all R_o equal →<br>every advantage is 0",
            x=0.5,
            y=0.5,
            xref="x domain",
            yref="y domain",
            showarrow=False,
            font={"color": HACKED},
        )
    return fig


# -------------------------------------------------------------------------------------- dashboard
def dashboard_figure(frame: pd.DataFrame, x: str) -> go.Figure:
    """Training curves, one panel per ``DASHBOARD_PANELS`` entry and one trace per metric (always the
    same traces, so live updates change data in place); metrics without data are hidden."""
    cols = 2
    n_rows = math.ceil(len(DASHBOARD_PANELS) / cols)
    fig = make_subplots(
        rows=n_rows, cols=cols, subplot_titles=[p[0] for p in DASHBOARD_PANELS], vertical_spacing=0.1
    )
    for k, (_, metrics) in enumerate(DASHBOARD_PANELS):
        row, col = k // cols + 1, k % cols + 1
        for j, metric in enumerate(metrics):
            xs, ys = metric_series(frame, metric, x)
            fig.add_scatter(
                x=xs,
                y=ys,
                name=metric,
                mode="lines+markers",
                line={
                    "color": COMPONENT_COLORS[j % len(COMPONENT_COLORS)],
                    "dash": "dot" if "explorer" in metric else "solid",
                },
                marker={"size": 9 if metric.startswith("eval/") else 5},
                visible=bool(xs),
                legendgroup=f"panel{k}",
                row=row,
                col=col,
            )
    label = "environment steps (actor + explorer)" if x != "iteration" else "iteration"
    fig.update_xaxes(title_text=label, row=n_rows)
    fig.update_layout(height=280 * n_rows + 80, margin={"t": 50}, title=f"Training curves against {label}")
    return fig
