"""SwapInspector: one iteration of group_mixing's reward swap (``swap.mode = "group_mixing"``, the earlier
rspo_kit design), task by task; a loop of the paper's RSPO is ``LoopInspector``'s (widgets/loop.py).

For the chosen task, left to right: the actor's own group (outcomes), the explorer's trajectories
with their label before the swap (process return, what the explorer trained on) and after it
(outcome, all the actor sees), the replay buffer, and the mixed group the actor learns from with its
advantages. A group is *rescued* when the actor's group had no outcome variance — a group-relative
advantage is zero everywhere — and the mixed group has some.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W

from rspo_kit.rewards.signals import RewardModel
from rspo_widgets._base import WidgetBase
from rspo_widgets._data import swap_tables
from rspo_widgets._figures import advantage_heatmap, swap_figure
from rspo_widgets._guard import guarded

EXPLANATION = (
    "<p style='max-width:60em'>RSPO per task: ① the actor A samples its group; ② the explorer B, trained "
    "on <span style='color:#ff7f0e'>process rewards</span>, samples its own trajectories; the swap "
    "relabels them with the <span style='color:#1f77b4'>outcome</span> (their process rewards never reach "
    "A); ③ those the filter admits enter the replay buffer; ④ A's group plus a few replayed trajectories "
    "form the mixed group, scored by outcome only. If A's own outcomes were all equal, its advantages "
    "were all zero: a replayed success <b>rescues</b> the group.</p>"
)


class SwapInspector(WidgetBase):
    """One ``on_swap`` event (or its ``data`` dict), task by task.

    ``algo_cfg`` is the run's ``AlgoConfig`` (``cfg.algo``: the advantage estimator of the mixed
    group); ``reward_model`` its ``RewardModel`` (``trainer.rewards``, or ``RewardModel.build(env,
    process=...)``) for the process labels and R_o.
    """

    title = "Reward swap"

    def __init__(self, event_or_dict: Any, algo_cfg: Any, reward_model: RewardModel):
        super().__init__()
        self.tables = swap_tables(event_or_dict, algo_cfg, reward_model)
        tasks = self.tables.summary["task_id"].tolist()
        if not tasks:
            raise ValueError("the swap event has no actor trajectories")
        rescued = set(self.tables.summary.loc[self.tables.summary["rescued"], "task_id"])
        self.task = W.Dropdown(
            options=[(f"{t}  ★ rescued" if t in rescued else t, t) for t in tasks],
            value=next((t for t in tasks if t in rescued), tasks[0]),  # open on a rescued group if any
            description="task",
            layout=W.Layout(width="50%"),
        )
        self.table = W.HTML(self.summary_html())
        swap_view = self._add_figure("swap", swap_figure(self.tables, self.task.value))
        steps_view = self._add_figure("advantages", self._heatmap())
        self.task.observe(self._on_task, names="value")
        self.widget = W.VBox([W.HTML(EXPLANATION), self.task, swap_view, steps_view, self.table, self.errors])

    def _heatmap(self):
        steps = self.tables.steps[self.tables.steps["task_id"] == self.task.value]
        return advantage_heatmap(
            steps,
            group=None if steps.empty else steps["group_id"].iloc[0],
            title=f"④ mixed group of {self.task.value}: step advantages under outcome reward",
        )

    @guarded
    def _on_task(self, _change) -> None:
        self._update_figure("swap", swap_figure(self.tables, self.task.value))
        self._update_figure("advantages", self._heatmap())

    def summary_html(self) -> str:
        """Every task of the iteration: outcomes before and after mixing, rescued groups highlighted."""
        s = self.tables.summary
        head = (
            "<tr><th>task</th><th>actor R_o</th><th>explorer won</th><th>admitted</th><th>in buffer</th>"
            "<th>replayed</th><th>mixed R_o</th><th>rescued</th></tr>"
        )
        rows = []
        for r in s.itertuples(index=False):
            style = "background:#e5f5e0;font-weight:bold" if r.rescued else ""
            zero = " <i>(no variance)</i>" if r.actor_zero_var else ""
            rows.append(
                f"<tr style='{style}'><td>{html.escape(r.task_id)}</td><td>{r.actor_outcomes}{zero}</td>"
                f"<td>{r.explorer_won}</td><td>{r.admitted}</td><td>{r.in_buffer}</td><td>{r.replayed}</td>"
                f"<td>{r.mixed_outcomes}</td><td>{'★ yes' if r.rescued else ''}</td></tr>"
            )
        n = int(s["rescued"].sum())
        zero = int(s["actor_zero_var"].sum())
        caption = f"{n} of {zero} groups without outcome variance rescued ({len(s)} tasks)"
        if self.tables.iteration is not None:
            caption = f"iteration {self.tables.iteration}: " + caption
        return (
            f"<table style='border-collapse:collapse;font-size:12px'><caption>{caption}</caption>"
            f"{head}{''.join(rows)}</table>"
        )

    def _html_parts(self) -> list[str]:
        return [EXPLANATION, self.summary_html()]

    def _static_figures(self):
        # a stored notebook cannot switch tasks: draw every task's swap (the step heatmaps stay out)
        return [swap_figure(self.tables, task) for task in self.tables.summary["task_id"]]
