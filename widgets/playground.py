"""EnvPlayground: play a task by hand and watch every process-reward component step by step."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W
import pandas as pd

from rspo_kit.envs import list_tasks, make_env
from rspo_kit.envs.base import reset_info
from rspo_kit.experiments.env_tour import env_process_rewards
from rspo_kit.rewards import process_reward
from rspo_kit.rewards.process import ProcessReward
from rspo_widgets._base import WidgetBase
from rspo_widgets._data import playground_row
from rspo_widgets._figures import timeline_figure
from rspo_widgets._guard import guarded


class EnvPlayground(WidgetBase):
    """Pick a task, click admissible actions (or type any text), see the env's reply and the rewards.

    ``env`` is any registered env. ``process`` names process rewards of ``env`` (or maps names to
    callables); by default every one it has: those registered for it and the generic ``progress``.
    Each is drawn as its own bar per step, so one sees which component pays for what. ``env_kwargs``
    go to ``make_env`` (e.g. ``{"max_steps": 20}``).
    """

    title = "Environment playground"

    def __init__(
        self,
        env: str = "alfworld",
        split: str = "eval",
        process: Sequence[str] | Mapping[str, ProcessReward] | None = None,
        n_tasks: int = 50,
        env_kwargs: Mapping[str, Any] | None = None,
    ):
        super().__init__()
        self.env_name = env
        self.env = make_env(env, **dict(env_kwargs or {}))
        self.tasks = list_tasks(env, split=split, n=n_tasks)
        if not self.tasks:
            raise ValueError(f"env {env!r} has no tasks in split {split!r}")
        if process is None:
            self.rewards: dict[str, ProcessReward] = env_process_rewards(env)
        elif isinstance(process, Mapping):
            self.rewards = dict(process)
        else:
            self.rewards = {name: process_reward(name, env=env) for name in process}
        self.rows: list[dict[str, Any]] = []
        self.done = False

        self.task = W.Dropdown(
            options=[(f"{t.id} ({t.kind})" if t.kind else t.id, i) for i, t in enumerate(self.tasks)],
            value=0,
            description="task",
            layout=W.Layout(width="60%"),
        )
        self.restart = W.Button(description="restart", icon="refresh")
        self.instruction = W.HTML()
        self.observation = W.HTML()
        self.status = W.HTML()
        self.actions = W.Box(layout=W.Layout(flex_flow="row wrap"))
        self.free_text = W.Text(
            placeholder="any text: the env answers invalid actions too", layout=W.Layout(width="50%")
        )
        self.send = W.Button(description="do it", button_style="primary")
        self.history = W.HTML()
        timeline = self._add_figure("timeline", timeline_figure([], list(self.rewards)))

        self.task.observe(self._on_task, names="value")
        self.restart.on_click(self._on_restart)
        self.send.on_click(self._on_send)
        self.widget = W.VBox(
            [
                W.HBox([self.task, self.restart]),
                self.instruction,
                self.observation,
                self.status,
                W.HTML("<b>admissible actions</b>"),
                self.actions,
                W.HBox([self.free_text, self.send]),
                timeline,
                self.history,
                self.errors,
            ]
        )
        self.reset(0)

    # ------------------------------------------------------------------------------- actions
    def reset(self, task: int | str = 0) -> None:
        """Start the task (an index into ``self.tasks`` or a task id) from the beginning."""
        index = task if isinstance(task, int) else [t.id for t in self.tasks].index(task)
        obs = self.env.reset(self.tasks[index])
        self.progress = dict(reset_info(self.env, obs)["progress"])
        self.rows, self.done = [], False
        self.instruction.value = f"<b>task:</b> {html.escape(obs.instruction)}"
        self._show(obs.text, obs.admissible, "")
        self._redraw()

    def act(self, action: str) -> dict[str, Any]:
        """Take one step with any string; returns the step's ``playground_row``."""
        if self.done:
            raise RuntimeError("the episode is over: choose a task or press restart")
        res = self.env.step(action)
        after = dict(res.info.get("progress", {}))
        row = playground_row(self.progress, after, action, res.valid, self.rewards, info=res.info)
        row |= {"step": len(self.rows) + 1, "done": res.done, "won": res.won, "score": res.score}
        self.rows.append(row)
        self.progress, self.done = after, res.done
        outcome = ""
        if res.done:
            outcome = f"episode over: <b>{'WON' if res.won else 'failed'}</b>, score {res.score:g}"
        self._show(res.obs.text, () if res.done else res.obs.admissible, outcome)
        self._redraw()
        return row

    @property
    def table(self) -> pd.DataFrame:
        """The steps played so far, one row each."""
        return pd.DataFrame(self.rows)

    # ------------------------------------------------------------------------------- callbacks
    @guarded
    def _on_task(self, change) -> None:
        self.reset(change["new"])

    @guarded
    def _on_restart(self, _button) -> None:
        self.reset(self.task.value)

    @guarded
    def _on_send(self, _button) -> None:
        text = self.free_text.value
        self.free_text.value = ""
        self.act(text)

    @guarded
    def _on_action(self, button) -> None:
        self.act(button.description)

    # ------------------------------------------------------------------------------- drawing
    def _show(self, text: str, admissible: Sequence[str], outcome: str) -> None:
        self.observation.value = f"<pre style='white-space: pre-wrap'>{html.escape(text)}</pre>"
        last = self.rows[-1] if self.rows else None
        parts = [f"step {len(self.rows)}"]
        if last is not None:
            valid = (
                "<span style='color:green'>valid</span>"
                if last["valid"]
                else "<b style='color:#d62728'>INVALID</b>"
            )
            parts += [
                f"last action <code>{html.escape(last['action'])}</code> {valid}",
                html.escape(last["progress"]),
            ]
        if outcome:
            parts.append(outcome)
        self.status.value = " · ".join(parts)
        buttons = []
        for action in admissible:
            b = W.Button(description=action, layout=W.Layout(width="auto"), tooltip=action)
            b.on_click(self._on_action)
            buttons.append(b)
        self.actions.children = buttons
        self.send.disabled = self.done

    def _redraw(self) -> None:
        self._update_figure("timeline", timeline_figure(self.rows, list(self.rewards)))
        self.history.value = self._history_html()

    def _history_html(self) -> str:
        if not self.rows:
            return ""
        columns = [
            "step",
            "action",
            "valid",
            "progress",
            *[f"reward/{n}" for n in self.rewards],
            "reward/total",
        ]
        return self.table[columns].to_html(index=False, float_format=lambda v: f"{v:.3f}", border=0)

    def _html_parts(self) -> list[str]:
        return [self.instruction.value, self.observation.value, self.status.value, self.history.value]
