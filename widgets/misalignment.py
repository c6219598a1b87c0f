"""RewardTimeline and MisalignmentView: where dense process rewards and the sparse outcome disagree.

Both take trajectories (``Trajectory`` objects) or a per-turn table (``load_turns(run_dir)``) and the
env's name, and rescore every step under the env's misalignment knob (``misalignment_knob``):
eps = 0 is the base process reward (the env's ``subgoal``, else the generic ``progress``), eps = 1
the hackable term ``hack`` (the env's ``"hack"`` reward by default, or any named or given). The slider
recomputes on the spot, so one can watch rank agreement fall and hacking appear as the reward drifts;
for an env without the hackable term it stays at 0 and the view says why.

ProgressModelView puts the paper's learned dense reward (``rspo_kit.rewards.progress_model``) beside the
hand-written one: both read the same trajectories, and the view shows where each pays and where it
agrees with the outcome.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W
import pandas as pd
import plotly.graph_objects as go

from rspo_kit.experiments.env_tour import HACK_REWARD, misalignment_knob
from rspo_kit.rewards import diagnose
from rspo_kit.rewards.process import ProcessReward
from rspo_kit.rewards.progress_compare import comparison_figure, comparison_summary
from rspo_widgets._base import WidgetBase
from rspo_widgets._data import episodes_of, hacked_trajectories, rescore
from rspo_widgets._figures import (
    disagreement_figure,
    misalignment_scatter,
    reward_timeline_figure,
)
from rspo_widgets._guard import guarded

ALL = "all"


class _Rescored(WidgetBase):
    """Shared state: episodes converted once, an eps slider, and the current rescored frame; each view
    lays out its own controls and figures around them (``_build``)."""

    def __init__(
        self,
        trajectories: Any,
        env: str,
        eps: float = 0.0,
        base: str | ProcessReward | None = None,
        hack: str | ProcessReward | None = HACK_REWARD,
        quantile: float = 0.75,
    ):
        super().__init__()
        self.env, self.quantile = env, quantile
        self.knob = misalignment_knob(env, base=base, hack=hack)
        self.base, self.hack = self.knob.base_name, self.knob.hack_name
        self.episodes = episodes_of(trajectories, env)
        if not self.episodes:
            raise ValueError("no trajectories to diagnose")
        if eps and not self.knob.available:
            raise ValueError(f"eps = {eps!r} needs a hackable term: {self.knob.reason}")
        self.eps = W.FloatSlider(
            value=eps,
            min=0.0,
            max=1.0,
            step=0.05,
            description="misalign eps",
            continuous_update=False,
            disabled=not self.knob.available,  # without a hackable term only eps = 0 exists
            style={"description_width": "initial"},
        )
        self.groups = list(dict.fromkeys(ep.group_id for ep in self.episodes))
        self._rescore()
        self._build()

    def _build(self) -> None:
        """The view's controls and figures, and ``self.widget`` holding them."""
        raise NotImplementedError

    def _rescore(self) -> None:
        self.frame = rescore(
            self.episodes, self.env, self.eps.value, base=self.knob.base, hack=self.knob.hack
        )
        self.diagnostics = diagnose(self.frame, quantile=self.quantile)

    def _summary_html(self) -> str:
        d = self.diagnostics
        ra, hk = d.rank_agreement, d.hacking
        summary = (
            f"eps={self.eps.value:.2f}: mean Kendall τ {ra.mean_tau:.3f} over {ra.n_groups - ra.n_undefined} "
            f"of {ra.n_groups} groups (the rest have no outcome or process variance) · hacking rate "
            f"{hk.rate:.2f} ({hk.n_hacked} of {hk.n_top} top-quartile trajectories failed) · "
            f"{int(d.disagreement['disagrees'].sum())} of {len(d.disagreement)} steps disagree"
        )
        return summary if self.knob.available else f"{summary} · eps stays 0: {self.knob.reason}"


class RewardTimeline(_Rescored):
    """Running process return of each trajectory of a group over its steps, coloured by outcome.

    A trajectory whose line climbs high but ends without a star (success) is what the process reward
    pays for and the outcome does not: red dashed lines are the hacking cases.
    """

    title = "Process reward timeline"

    def _build(self) -> None:
        self.group = W.Dropdown(options=[ALL, *self.groups], value=self.groups[0], description="group")
        view = self._add_figure("timeline", self._figure())
        self.eps.observe(self._on_eps, names="value")
        self.group.observe(self._on_group, names="value")
        self.widget = W.VBox([W.HBox([self.group, self.eps]), view, self.errors])

    def _figure(self):
        group = None if self.group.value == ALL else self.group.value
        return reward_timeline_figure(self.frame, self.diagnostics, group=group)

    @guarded
    def _on_eps(self, _change) -> None:
        self._rescore()
        self._update_figure("timeline", self._figure())

    @guarded
    def _on_group(self, _change) -> None:
        self._update_figure("timeline", self._figure())


class MisalignmentView(_Rescored):
    """Process return vs outcome per group (Kendall τ), hacking cases, per-step disagreement, and a
    misalignment knob that rescores every step on the spot.

    ``role`` narrows a turn table or mixed batch to the actor's, explorer's or replayed trajectories.
    ``base`` and ``hack`` are the knob's two terms (``misalignment_knob``): by default the env's
    ``subgoal`` (else the generic ``progress``) and its ``"hack"`` reward, where it has one.
    """

    title = "Reward misalignment"

    def _build(self) -> None:
        self._all_episodes = self.episodes  # what the role menu narrows
        roles = list(dict.fromkeys(ep.role for ep in self._all_episodes))
        self.role = W.Dropdown(options=[ALL, *roles], value=ALL, description="role")
        self.group = W.Dropdown(options=[ALL, *self.groups], value=ALL, description="group")
        self.summary = W.HTML(self._summary_html())
        scatter = self._add_figure("scatter", self._scatter())
        bars = self._add_figure("disagreement", disagreement_figure(self.diagnostics))
        timeline = self._add_figure("timeline", self._timeline())
        self.eps.observe(self._on_eps, names="value")
        self.role.observe(self._on_role, names="value")
        self.group.observe(self._on_group, names="value")
        self.widget = W.VBox(
            [
                W.HBox([self.eps, self.role, self.group]),
                self.summary,
                scatter,
                bars,
                timeline,
                self.errors,
            ]
        )

    def _selected_group(self) -> str | None:
        return None if self.group.value == ALL else self.group.value

    def _scatter(self):
        return misalignment_scatter(self.diagnostics, group=self._selected_group(), eps=self.eps.value)

    def _timeline(self):
        # every group's lines at once is unreadable past a few groups: "all" shows the first
        group = self._selected_group() or self.groups[0]
        return reward_timeline_figure(self.frame, self.diagnostics, group=group)

    def _redraw(self) -> None:
        self.summary.value = self._summary_html()
        self._update_figure("scatter", self._scatter())
        self._update_figure("disagreement", disagreement_figure(self.diagnostics))
        self._update_figure("timeline", self._timeline())

    @guarded
    def _on_eps(self, _change) -> None:
        self._rescore()
        self._redraw()

    @guarded
    def _on_role(self, change) -> None:
        role = change["new"]
        self.episodes = [ep for ep in self._all_episodes if role in (ALL, ep.role)]
        self.groups = list(dict.fromkeys(ep.group_id for ep in self.episodes))
        self._rescore()
        with self.group.hold_trait_notifications():
            self.group.options = [ALL, *self.groups]
            self.group.value = ALL
        self._redraw()

    @guarded
    def _on_group(self, _change) -> None:
        self._redraw()

    def hacking_cases(self) -> pd.DataFrame:
        """The trajectories counted as hacking at the current eps (top-quartile process return, failed)."""
        t = self.diagnostics.trajectories
        return t[hacked_trajectories(t, self.diagnostics.hacking.threshold)]

    def _html_parts(self) -> list[str]:
        return [f"<p>{html.escape(self._summary_html())}</p>"]


# --------------------------------------------------------------------- the learned dense reward


class ProgressModelView(WidgetBase):
    """The learned progress model's per-step rewards beside the hand-written reward and the outcome,
    for the same trajectories: a group at a time (running returns, two panels), the agreement of each
    signal with the outcome (``comparison_summary``), and the steps of the chosen group as a table.

    ``table`` is ``rspo_kit.rewards.progress_model.step_comparison(model, trajectories, env)``.
    """

    title = "Learned progress model vs hand-written reward"

    def __init__(self, table: pd.DataFrame):
        super().__init__()
        if table.empty:
            raise ValueError("no steps to show: step_comparison gave an empty table")
        self.table = table
        self.groups = list(dict.fromkeys(table["group_id"]))
        self.summary = comparison_summary(table)
        self.group = W.Dropdown(options=[ALL, *self.groups], value=self.groups[0], description="group")
        self.steps = W.HTML(self._steps_html())
        view = self._add_figure("comparison", self._figure())
        self.group.observe(self._on_group, names="value")
        self.widget = W.VBox([self.group, W.HTML(self._summary_html()), view, self.steps, self.errors])

    def _selected(self) -> str | None:
        return None if self.group.value == ALL else self.group.value

    def _figure(self) -> go.Figure:
        return comparison_figure(self.table, self._selected())

    def _summary_html(self) -> str:
        return self.summary.round(3).to_html(index=False, na_rep="–")

    def _steps_html(self) -> str:
        group = self._selected() or self.groups[0]
        cols = ["traj_id", "step", "action", "learned", "handwritten", "outcome", "won"]
        return self.table.loc[self.table["group_id"] == group, cols].round(3).to_html(index=False, na_rep="–")

    @guarded
    def _on_group(self, _change) -> None:
        self._update_figure("comparison", self._figure())
        self.steps.value = self._steps_html()

    def _html_parts(self) -> list[str]:
        return [self._summary_html(), self._steps_html()]
