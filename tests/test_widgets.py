"""The notebook widgets on real records: one smoke run of the lock env feeds them all.

Each test drives a widget the way a person does — setting ``.value`` on a control or clicking a
button — and checks that the figure's data changed accordingly. No kernel or browser is needed.
"""

from __future__ import annotations

import doctest
import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
import torch
from lock_env import register_lock
from trainer_runs import trained

import rspo_widgets
from rspo_kit.records import load_turns
from rspo_kit.rewards import diagnose
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.train import preset, train
from rspo_kit.train.trainer import Event
from rspo_kit.train.update import UpdateBatch, batch_advantages
from rspo_widgets import (
    AdvantageHeatmap,
    EnvPlayground,
    LoopInspector,
    MisalignmentView,
    RewardTimeline,
    SwapInspector,
    TrainingDashboard,
    TrajectoryViewer,
    _data,
    playground_row,
    rescore,
    to_html,
)

torch.set_num_threads(1)
register_lock()


class Recorder:
    """A callback that keeps every event."""

    def __init__(self):
        self.events: list[Event] = []

    def __getattr__(self, name):
        if name.startswith("on_"):
            return self.events.append
        raise AttributeError(name)

    def of(self, name: str) -> list[Event]:
        return [e for e in self.events if e.name == name]


def _smoke_run(tmp_path_factory, folder: str, callbacks, env: str = "dial", **preset_kwargs):
    """A seed-0 smoke run in a fresh folder, trained to its end with ``callbacks`` attached: its config
    and trainer."""
    cfg = preset("smoke", env=env, seed=0, **preset_kwargs)
    cfg.train.run_dir = str(tmp_path_factory.mktemp(folder) / "run")
    cfg.train.threads = 1
    return cfg, trained(cfg, callbacks)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A two-loop RSPO-GiGPO smoke run on the lock env (seconds), with a live dashboard attached."""
    recorder, dashboard = Recorder(), TrainingDashboard()
    cfg, trainer = _smoke_run(tmp_path_factory, "widgets", [recorder, dashboard], algo="gigpo", swap=True)
    return {
        "cfg": cfg,
        "trainer": trainer,
        "rec": recorder,
        "dash": dashboard,
        "dir": Path(cfg.train.run_dir),
    }


@pytest.fixture(scope="module")
def group_mixing_run(tmp_path_factory):
    """A two-iteration smoke run of the earlier design (group_mixing), whose swap SwapInspector draws."""
    recorder = Recorder()
    cfg, trainer = _smoke_run(tmp_path_factory, "group_mixing", [recorder], algo="gigpo", swap="group_mixing")
    return {"cfg": cfg, "trainer": trainer, "rec": recorder}


def _loop_inspector(run) -> LoopInspector:
    """The LoopInspector of a paper-loop run's first loop (``on_update_end``'s record and batch)."""
    data = run["rec"].of("on_update_end")[0].data
    algo = run["cfg"].algo
    return LoopInspector(data["record"], data["batch"], run["trainer"].rewards, algo.clip_low, algo.clip_high)


def _trajs(run, role="actor"):
    return next(e for e in run["rec"].of("on_rollout_end") if e.data["role"] == role).data["trajectories"]


def _ys(fig) -> list[float]:
    return [y for trace in fig.data for y in (trace.y or ())]


# ------------------------------------------------------------------------------------- plumbing
def test_pure_helpers_docstring_examples():
    result = doctest.testmod(_data, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0


def test_a_failing_callback_shows_its_traceback_in_the_error_area(run, monkeypatch):
    view = MisalignmentView(_trajs(run), env="dial")

    def broken(*args, **kwargs):
        raise RuntimeError("the rescoring broke")

    monkeypatch.setattr("rspo_widgets.misalignment.rescore", broken)
    view.eps.value = 0.5  # the observer runs, fails, and must not lose the error
    text = "".join(o["text"] for o in view.errors.outputs)
    assert "RuntimeError: the rescoring broke" in text and "Traceback" in text
    assert "the rescoring broke" in view.last_error


def test_every_widget_renders_static_html(run, group_mixing_run):
    swap = group_mixing_run["rec"].of("on_swap")[0]  # the earlier design's swap: SwapInspector's
    batch = run["rec"].of("on_update_end")[0].data["batch"]
    rm = run["trainer"].rewards
    widgets = [
        TrajectoryViewer(_trajs(run), process=rm),
        MisalignmentView(_trajs(run), env="dial"),
        RewardTimeline(_trajs(run), env="dial"),
        SwapInspector(swap, group_mixing_run["cfg"].algo, group_mixing_run["trainer"].rewards),
        _loop_inspector(run),
        AdvantageHeatmap(batch, run["cfg"].algo),
        run["dash"],
    ]
    for w in widgets:
        page = to_html(w)
        assert page.startswith("<!DOCTYPE html>") and "plotly" in page, type(w).__name__
        assert w.static_html(include_plotlyjs=False, full_html=False).startswith("<div>")
        assert isinstance(w.widget, rspo_widgets._base.W.Box)
        assert w.figure is next(iter(w.figures.values()))


def test_sync_figure_replaces_traces_and_drops_stale_properties():
    target = go.FigureWidget(go.Figure([go.Bar(x=[1], y=[2], text=["old"])]))
    rspo_widgets._base.sync_figure(target, go.Figure([go.Bar(x=[1, 2], y=[3, 4])]))
    trace = target.data[0]
    assert list(trace.y) == [3, 4] and trace.text is None
    rspo_widgets._base.sync_figure(target, go.Figure([go.Scatter(y=[1]), go.Scatter(y=[2])]))
    assert [t.type for t in target.data] == ["scatter", "scatter"]


def test_without_anywidget_figures_fall_back_to_an_output(run, monkeypatch):
    def no_anywidget(*args, **kwargs):
        raise ImportError("Please install anywidget to use the FigureWidget class")

    monkeypatch.setattr(go, "FigureWidget", no_anywidget)
    view = TrajectoryViewer(_trajs(run))
    assert type(view.figure) is go.Figure
    html_before = view._fallback_views["steps"].outputs[0]["data"]["text/html"]
    view.outcome.value = "successful" if any(t.won for t in _trajs(run)) else "failed"
    assert view._fallback_views["steps"].outputs[0]["data"]["text/html"] != html_before


# ----------------------------------------------------------------------------------- playground
def test_playground_row_calls_rewards_and_sums_them():
    row = playground_row(
        {"digits": 0},
        {"digits": 1},
        "press 1",
        True,
        {"a": lambda b, a, *_: a["digits"] - b["digits"], "b": 0.25},
    )
    assert row == {
        "action": "press 1",
        "valid": True,
        "progress": "digits 0→1",
        "reward/a": 1.0,
        "reward/b": 0.25,
        "reward/total": 1.25,
    }


def test_playground_buttons_text_and_task_choice():
    pg = EnvPlayground(env="dial", split="train", process=("subgoal", "hack"))
    code = pg.tasks[0].meta["code"]
    assert [b.description for b in pg.actions.children] == ["press 1", "press 2", "press 3"]
    button = next(b for b in pg.actions.children if b.description == f"press {code[0]}")
    button.click()
    assert pg.rows[-1]["reward/subgoal"] == 0.5 and pg.rows[-1]["reward/hack"] == 0.5
    pg.free_text.value = "dance"
    pg.send.click()
    assert pg.rows[-1]["valid"] is False and pg.rows[-1]["reward/total"] == 0.0
    assert "INVALID" in pg.status.value
    bars = {t.name: t for t in pg.figure.data}
    assert list(bars["subgoal"].y) == [0.5, 0.0] and list(bars["invalid action"].x) == [2]
    assert list(bars["return so far (sum)"].y) == [1.0, 1.0]

    pg.task.value = 3  # another task starts afresh
    assert pg.rows == [] and len(pg.figure.data[0].x) == 0
    for digit in pg.tasks[3].meta["code"]:
        pg.act(f"press {digit}")
    assert pg.done and "WON" in pg.status.value and pg.actions.children == ()
    pg.send.click()  # acting after the end is an error the user sees
    assert "episode is over" in pg.last_error


def test_playground_on_alfworld_defaults():
    pg = EnvPlayground(n_tasks=3)
    action = pg.actions.children[0].description
    pg.actions.children[0].click()
    assert pg.rows[0]["action"] == action and {"reward/subgoal", "reward/heuristic"} <= set(pg.rows[0])
    assert pg.last_error is None


# --------------------------------------------------------------------------------- trajectories
def test_step_frame_probabilities_rewards_and_advantages(run):
    batch = run["rec"].of("on_update_end")[0].data["batch"]
    adv = batch_advantages(batch, run["cfg"].algo)
    frame = _data.step_frame(batch.trajs, process=run["trainer"].rewards, advantages=adv)
    assert len(frame) == sum(len(t.steps) for t in batch.trajs)
    assert frame["advantage"].tolist() == pytest.approx(adv.step.tolist())
    step = batch.trajs[0].steps[0]
    assert frame["prob"].iloc[0] == pytest.approx(math.exp(step.logprob))
    lock = run["trainer"].rewards
    assert frame.groupby("traj")["process_reward"].sum().tolist() == pytest.approx(
        [sum(lock.process_steps(t)) for t in batch.trajs]
    )
    with pytest.raises(ValueError, match="advantages has 1 entries"):
        _data.step_frame(batch.trajs, advantages=[0.0])


def _group_with_both_outcomes(run):
    """A batch of the run and one of its groups with a success and a failure (made if none exists).

    Which groups mix outcomes depends on the seeded smoke run, hence on the locally built tiny
    tokenizer and weights; when no group does, one trajectory's outcome is flipped on a copy, which
    is all the viewer's filters read.
    """
    import copy

    from rspo_kit.train.update import UpdateBatch

    batches = [e.data["batch"] for e in run["rec"].of("on_update_end")]
    for batch in batches:
        for g in dict.fromkeys(t.group_id for t in batch.trajs):
            if len({t.won for t in batch.trajs if t.group_id == g}) == 2:
                return batch, g
    batch = batches[0]
    flipped = copy.copy(batch.trajs[0])
    flipped.won = not flipped.won
    return UpdateBatch([flipped, *batch.trajs[1:]], batch.rewards, batch.offpolicy), flipped.group_id


def test_trajectory_filters_remove_trajectories(run):
    batch, group = _group_with_both_outcomes(run)
    trajs = batch.trajs
    viewer = TrajectoryViewer(
        trajs, advantages=batch_advantages(batch, run["cfg"].algo), process=run["trainer"].rewards
    )
    viewer.group.value = group

    def shown():
        return {t.meta for t in viewer.figure.data}

    everyone = shown()
    assert len(everyone) == sum(t.group_id == group for t in trajs)
    viewer.outcome.value = "successful"
    assert shown() and all(trajs[i].won for i in shown()) and shown() < everyone
    assert "✗" not in viewer.steps.value.split("<tr>")[1]  # no failed trajectory in the header row
    viewer.outcome.value = "failed"
    assert all(not trajs[i].won for i in shown())
    viewer.outcome.value = "all"
    viewer.source.value = "replay"
    assert all(trajs[i].source == "replay" for i in shown())
    viewer.source.value = "actor"
    assert all(trajs[i].source == "actor" for i in shown())
    assert "A=" in viewer.steps.value and "r_p=" in viewer.steps.value


def test_trajectory_viewer_decodes_prompts_and_token_probabilities():
    from types import SimpleNamespace as NS

    class Tok:
        def decode(self, ids):
            return "".join(chr(96 + i) for i in ids)

    step = NS(
        prompt_ids=[1, 2, 3],
        action_ids=[8, 9],
        action="hi",
        logprob=math.log(0.25),
        token_logprobs=[math.log(0.5), math.log(0.5)],
        valid=False,
        anchor="",
        progress_before={},
        progress_after={},
        info={},
    )
    traj = NS(task_id="t", kind="k", group_id="t@1", source="actor", steps=[step], won=False, score=0.0)
    viewer = TrajectoryViewer([traj], tokenizer=Tok())
    assert _data.token_probs(step, Tok()) == [("h", 0.5), ("i", 0.5)]
    cell = viewer.steps.value
    assert "abc" in cell and "p=0.250" in cell and "INVALID" in cell and "title='p=0.500'" in cell
    viewer.invalid_only.value = True
    assert viewer.figure.data  # the invalid step's trajectory is still drawn


# ---------------------------------------------------------------------------------- misalignment
def test_rescore_matches_misalign_and_the_turn_table(run):
    trajs = _trajs(run)
    frame = rescore(trajs, "dial", 0.0)
    rm = RewardModel.build("dial")
    per_traj = frame.groupby("traj_id")["process_reward"].sum().tolist()
    assert per_traj == pytest.approx([sum(rm.process_steps(t)) for t in trajs])
    hack = rescore(trajs, "dial", 1.0)
    assert hack["process_reward"].tolist() == [0.5 * v for v in hack["valid"]]  # lock's hack pays any press

    # the per-turn table gives the same frame (first progress recovered by resetting the env): its
    # actor rows are A's k on-policy rollouts of the loop, in order
    table = load_turns(run["dir"], iteration=1)
    actor = table[table["role"] == "actor"]
    rollouts = [e for e in run["rec"].of("on_rollout_end") if e.iteration == 1 and e.data["role"] == "actor"]
    assert len(rollouts) == run["cfg"].swap.loop_steps
    from_table = rescore(actor, "dial", 0.3)
    from_trajs = rescore([t for e in rollouts for t in e.data["trajectories"]], "dial", 0.3)
    assert from_table["process_reward"].tolist() == pytest.approx(from_trajs["process_reward"].tolist())
    assert from_table["outcome"].tolist() == from_trajs["outcome"].tolist()
    diag = diagnose(from_table)
    assert diag.rank_agreement.n_groups == len(set(from_table["group_id"]))


def test_turn_table_trajectories_stay_apart_by_role(run):
    table = load_turns(run["dir"])
    episodes = _data.episodes_of(table, "dial")
    keys = table.drop_duplicates(["iteration", "role", "group_id", "traj_id"])
    assert len(episodes) == len(keys)


def test_eps_slider_changes_the_scatter(run):
    view = MisalignmentView(_trajs(run) + _trajs(run, "explorer"), env="dial")
    before = _ys(view.figures["scatter"])
    title = view.figures["scatter"].layout.title.text
    assert "Kendall τ" in title and "eps=0.00" in title
    view.eps.value = 1.0
    after = _ys(view.figures["scatter"])
    assert after != before and len(after) == len(before)
    assert "eps=1.00" in view.figures["scatter"].layout.title.text
    assert view.last_error is None
    bars = view.figures["disagreement"].data
    assert {b.name.split(" ")[0] for b in bars} == {"rewarded", "unrewarded"}
    # hacking cases are the failed trajectories at or above the threshold, and drawn with a red ring
    cases = view.hacking_cases()
    assert not cases["succeeded"].any()
    rings = [
        w
        for t in view.figures["scatter"].data
        if t.marker and t.marker.line and t.marker.line.width and isinstance(t.marker.line.width, tuple)
        for w in t.marker.line.width
    ]
    assert rings.count(3) == len(cases)


def test_role_and_group_filters(run):
    table = load_turns(run["dir"])
    view = MisalignmentView(table, env="dial")
    assert set(view.role.options) >= {"all", "actor", "explorer"}
    n_all = len(_ys(view.figures["scatter"]))
    view.role.value = "explorer"
    assert set(ep.role for ep in view.episodes) == {"explorer"}
    assert len(_ys(view.figures["scatter"])) < n_all
    group = view.group.options[1]
    view.group.value = group
    assert group in view.figures["scatter"].layout.title.text
    assert group in view.figures["timeline"].layout.title.text
    assert view.last_error is None


def test_reward_timeline_lines_follow_eps_and_group(run):
    trajs = _trajs(run)
    timeline = RewardTimeline(trajs, env="dial")
    group = timeline.group.value
    n_group = sum(t.group_id == group for t in trajs)
    lines = [t for t in timeline.figure.data if t.showlegend is not False]
    assert len(lines) == n_group
    before = _ys(timeline.figure)
    timeline.eps.value = 1.0
    assert _ys(timeline.figure) != before
    timeline.group.value = "all"
    assert len([t for t in timeline.figure.data if t.showlegend is not False]) == len(trajs)


# ------------------------------------------------------------------------------------------ swap
def test_swap_tables_agree_with_the_trainer_metrics(group_mixing_run):
    run = group_mixing_run
    for event in run["rec"].of("on_swap"):
        tables = _data.swap_tables(event, run["cfg"].algo, run["trainer"].rewards)
        assert tables.iteration == event.iteration
        assert int(tables.summary["rescued"].sum()) == event.metrics["swap/rescued_groups"]
        assert int(tables.summary["replayed"].sum()) == event.metrics["swap/replayed"]
        m = tables.members
        assert (m["panel"] == "mixed").sum() == len(event.data["mixed"])
        explorer = m[m["panel"] == "explorer"]
        rm = run["trainer"].rewards
        assert explorer["process_return"].tolist() == pytest.approx(
            [sum(rm.process_steps(t)) for t in event.data["explorer"]]
        )
        assert explorer["outcome"].tolist() == [float(t.won) for t in event.data["explorer"]]


def test_swap_inspector_task_dropdown_and_rescued_marks():
    """Hand-made swap: task a's actor group all failed, a replayed success rescues it; task b has variance."""
    from rspo_kit.policy.rollout import Step, Trajectory
    from rspo_kit.train.config import AlgoConfig

    def traj(task, source, won, n=2):
        steps = [
            Step(
                [1],
                [2],
                "press 1",
                -0.5,
                [],
                True,
                f"s{j}",
                {"digits": 0},
                {"digits": int(won and j == n - 1)},
            )
            for j in range(n)
        ]
        return Trajectory(task, "lock", f"{task}@1", source, steps, won, float(won))

    actor = [
        traj("a", "actor", False),
        traj("a", "actor", False),
        traj("b", "actor", True),
        traj("b", "actor", False),
    ]
    explorer = [traj("a", "explorer", True, 3), traj("a", "explorer", False), traj("b", "explorer", False)]
    buffer = [explorer[0]]
    replayed = Trajectory("a", "lock", "a@1", "replay", explorer[0].steps, True, 1.0)
    mixed = [actor[0], actor[1], replayed, actor[2], actor[3]]
    data = {
        "actor": actor,
        "explorer": explorer,
        "mixed": mixed,
        "offpolicy": [False, False, True, False, False],
        "buffer": buffer,
    }
    event = Event("on_swap", 1, {}, data)
    inspector = SwapInspector(event, AlgoConfig(name="grpo"), RewardModel.build("dial"))
    s = inspector.tables.summary.set_index("task_id")
    assert s.loc["a", "rescued"] and not s.loc["b", "rescued"] and s.loc["a", "admitted"] == 1
    assert inspector.task.value == "a"  # opens on the rescued group
    assert "RESCUED" in inspector.figure.layout.title.text
    mixed_bar = inspector.figure.data[-1]
    assert list(mixed_bar.x) == ["A0 ✗", "A1 ✗", "R2 ✓"] and mixed_bar.y[2] > 0 > mixed_bar.y[0]
    process_bar, outcome_bar = inspector.figure.data[1], inspector.figure.data[2]
    assert list(process_bar.y) == [0.5, 0.0] and list(outcome_bar.y) == [1.0, 0.0]
    assert "★ yes" in inspector.table.value

    inspector.task.value = "b"
    assert "RESCUED" not in inspector.figure.layout.title.text
    assert list(inspector.figure.data[-1].x) == ["A0 ✓", "A1 ✗"]
    assert len(inspector.figures["advantages"].data[0].y) == 2
    assert inspector.static_html().count("RESCUED") == 1  # every task drawn, one rescued


def test_swap_inspector_on_a_real_event(group_mixing_run, run):
    gm = group_mixing_run
    event = gm["rec"].of("on_swap")[-1]
    inspector = SwapInspector(event.data, gm["cfg"].algo, gm["trainer"].rewards)
    for task in inspector.tables.summary["task_id"]:
        inspector.task.value = task
        assert task in inspector.figure.layout.title.text
    assert inspector.last_error is None
    # a loop of the paper's RSPO mixes no groups: its event is LoopInspector's, and says so
    with pytest.raises(ValueError, match="LoopInspector draws it"):
        SwapInspector(run["rec"].of("on_swap")[-1], run["cfg"].algo, run["trainer"].rewards)


# ------------------------------------------------------------------------------------ advantages
def test_advantage_heatmap_cells_and_anchor_groups(run):
    batch = run["rec"].of("on_update_end")[0].data["batch"]
    heat = AdvantageHeatmap(batch, run["cfg"].algo)
    frame = heat.frame
    assert frame["advantage"].tolist() == batch.advantages.tolist()  # what the update used
    assert frame["advantage"].tolist() == pytest.approx(
        batch_advantages(batch, run["cfg"].algo).step.tolist()
    )
    sizes = frame.groupby(["group_id", "anchor"]).size()
    assert all(
        sizes[(g, a)] == n
        for g, a, n in zip(frame["group_id"], frame["anchor"], frame["anchor_group_size"], strict=True)
    )
    group = heat.group.value
    z = heat.figure.data[0].z
    assert len(z) == frame[frame["group_id"] == group]["traj"].nunique()
    assert "anchor group" in heat.figure.data[0].text[0][0]
    heat.group.value = "all"
    assert len(heat.figure.data[0].z) == frame["traj"].nunique()


def test_advantage_heatmap_shows_ppos_own_advantages_and_recomputes_under_another_config(tmp_path):
    from dataclasses import replace

    cfg = preset("smoke", env="dial", algo="ppo", swap=False, seed=0)
    cfg.train.run_dir, cfg.train.threads, cfg.train.iterations = str(tmp_path / "ppo"), 1, 1
    recorder = Recorder()
    train(cfg, callbacks=[recorder])
    batch = recorder.of("on_update_end")[0].data["batch"]
    own = AdvantageHeatmap(batch, cfg.algo).frame["advantage"].tolist()
    assert own == batch.advantages.tolist()
    returns_to_go = batch_advantages(batch, cfg.algo).step.tolist()
    assert own != pytest.approx(returns_to_go)  # the critic's values changed them
    other = replace(cfg.algo, lam=0.5)
    assert AdvantageHeatmap(batch, other).frame["advantage"].tolist() == pytest.approx(
        batch_advantages(batch, other).step.tolist()
    )


def test_advantage_heatmap_matches_a_hand_made_gigpo_batch():
    from rspo_kit.policy.rollout import Step, Trajectory
    from rspo_kit.train.config import AlgoConfig

    def traj(anchors, won):
        steps = [Step([1], [2], "a", 0.0, [], True, a, {}, {}) for a in anchors]
        return Trajectory("t", "k", "t@1", "actor", steps, won, float(won))

    batch = UpdateBatch([traj(["x", "y"], True), traj(["x", "z"], False)], [[0.0, 1.0], [0.0, 0.0]])
    heat = AdvantageHeatmap(batch, AlgoConfig(name="gigpo", gamma=0.5))
    assert heat.frame["anchor_group_size"].tolist() == [2, 1, 2, 1]
    # A = A^E + A^S (gigpo docstring example): [0.5+0.25, 0.5, -0.5-0.25, -0.5]
    assert heat.frame["advantage"].tolist() == pytest.approx([0.75, 0.5, -0.75, -0.5])
    assert "50% of steps share" in heat.stats.value


# ------------------------------------------------------------------------------------- dashboard
def test_dashboard_traces_grow_with_events():
    dash = TrainingDashboard()
    success = next(t for t in dash.figure.data if t.name == "rollout/success")
    assert len(success.x) == 0 and success.visible is False
    dash.on_update_end(
        Event("on_update_end", 1, {"rollout/success": 0.25, "rollout/cumulative_env_steps": 40.0})
    )
    dash.on_update_end(
        Event("on_update_end", 2, {"rollout/success": 0.5, "rollout/cumulative_env_steps": 90.0})
    )
    dash.on_eval(Event("on_eval", 2, {"eval/success": 0.4}))
    trace = {t.name: t for t in dash.figure.data}
    assert list(trace["rollout/success"].y) == [0.25, 0.5] and trace["rollout/success"].visible
    assert list(trace["eval/success"].x) == [2]
    dash.x.value = "rollout/cumulative_env_steps"
    trace = {t.name: t for t in dash.figure.data}
    assert list(trace["rollout/success"].x) == [40.0, 90.0] and list(trace["eval/success"].x) == [90.0]
    assert "environment steps" in dash.figure.layout.title.text
    dash.on_update_end(Event("on_update_end", 3, {"rollout/success": "oops"}))  # not a number: not drawn
    assert list({t.name: t for t in dash.figure.data}["rollout/success"].y) == [0.25, 0.5]
    assert dash.last_error is None


def test_dashboard_live_equals_from_run(run):
    live = run["dash"]
    assert live.last_error is None and live.last_swap is run["rec"].of("on_swap")[-1]
    finished = TrainingDashboard.from_run(run["dir"], x="rollout/cumulative_env_steps")
    live.x.value = "rollout/cumulative_env_steps"
    for a, b in zip(live.figure.data, finished.figure.data, strict=True):
        assert a.name == b.name
        assert list(a.x) == pytest.approx(list(b.x)) and list(a.y) == pytest.approx(list(b.y)), a.name
    success = {t.name: t for t in finished.figure.data}["eval/success"]
    assert len(success.x) == 3  # start + both iterations
    assert len(pd.DataFrame(finished.metrics)) == 3
    with pytest.raises(ValueError, match="x must be one of"):
        TrainingDashboard(x="epochs")


# ------------------------------------------------------------------------- a user's env (cellar)
# tests/cellar_env.py: registered outside rspo_kit, no subgoal or hack reward, one of its own (wander)
import cellar_env  # noqa: E402  (registers "cellar")

from rspo_kit.experiments.env_tour import detour_groups  # noqa: E402


@pytest.fixture(scope="module")
def cellar_run(tmp_path_factory):
    """A two-iteration RSPO-GRPO smoke run on the user's env, its explorer on the generic progress."""
    recorder, dashboard = Recorder(), TrainingDashboard()
    cfg, trainer = _smoke_run(
        tmp_path_factory,
        "cellar",
        [recorder, dashboard],
        env="cellar",
        algo="grpo",
        swap=True,
        reward__process="progress",
    )
    return {"cfg": cfg, "trainer": trainer, "rec": recorder, "dash": dashboard}


def _cellar_walks():
    """The expert and a random walker on every eval task, as trajectories the misalignment views read."""
    from types import SimpleNamespace as NS

    groups = detour_groups("cellar", cellar_env.cellar_tasks("eval"), [0.0, 1.0], seed=0, max_steps=12)
    return [
        NS(
            group_id=g.group_id,
            source="actor",
            task_id=g.group_id,
            won=g.episode.won,
            score=g.episode.score,
            steps=g.episode.steps,
        )
        for g in groups
    ]


def test_playground_on_a_user_env_shows_every_process_reward_it_has():
    pg = EnvPlayground(env="cellar", split="eval", env_kwargs={"max_steps": 20})
    assert list(pg.rewards) == ["wander", "progress"]  # its own, then the generic one
    task = cellar_env.cellar_tasks("eval")[0]
    assert (task.meta["key"], task.meta["door"]) == (2, 0)  # the key in the start room, the door 2 west
    assert pg.progress == {"key": 0.0, "door": 0.0}
    for action in ["take key", "go west", "go west", "unlock door"]:
        next(b for b in pg.actions.children if b.description == action).click()
    assert pg.table["reward/progress"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert pg.table["reward/wander"].tolist() == [0.0, 0.5, 0.5, 0.0]
    pg.act("open door")
    assert pg.done and "WON" in pg.status.value and pg.last_error is None


def test_rescore_on_a_user_env_mixes_in_the_hack_term_it_is_given():
    walks = _cellar_walks()
    aligned = rescore(walks, "cellar", 0.0)  # base: the generic progress, its return key + door
    returns = aligned.groupby("traj_id")["process_reward"].sum()
    assert returns.tolist() == pytest.approx(
        [2.0 if w.won else sum(w.steps[-1].progress_after.values()) for w in walks]
    )
    hacked = rescore(walks, "cellar", 1.0, hack="wander")
    moves = [0.5 * a.startswith("go ") for a in hacked["action"]]
    assert hacked["process_reward"].tolist() == moves
    with pytest.raises(ValueError, match="has no process reward 'hack'"):
        rescore(walks, "cellar", 0.5)  # the cellar has no "hack": only eps = 0 exists


def test_misalignment_views_on_a_user_env_without_and_with_a_hack_term():
    walks = _cellar_walks()
    plain = MisalignmentView(walks, env="cellar")
    assert plain.eps.disabled and plain.base == "progress" and plain.hack is None
    assert "eps stays 0: env 'cellar' has no process reward 'hack'" in plain.summary.value
    with pytest.raises(ValueError, match="needs a hackable term"):
        MisalignmentView(walks, env="cellar", eps=0.5)

    view = MisalignmentView(walks, env="cellar", hack="wander")
    assert not view.eps.disabled and view.hack == "wander"
    before = _ys(view.figures["scatter"])
    view.eps.value = 1.0  # walking pays: the random walkers now outrank the expert
    assert _ys(view.figures["scatter"]) != before and view.diagnostics.rank_agreement.mean_tau < 0
    timeline = RewardTimeline(walks, env="cellar", hack="wander")
    before = _ys(timeline.figure)
    timeline.eps.value = 1.0
    assert _ys(timeline.figure) != before and view.last_error is None and timeline.last_error is None


def test_every_widget_renders_a_run_on_a_user_env(cellar_run):
    run = cellar_run
    batch = run["rec"].of("on_update_end")[0].data["batch"]
    rm = run["trainer"].rewards
    trajs = _trajs(run)
    widgets = [
        TrajectoryViewer(trajs, process=rm),
        MisalignmentView(trajs, env="cellar", hack="wander"),
        RewardTimeline(trajs, env="cellar"),
        _loop_inspector(run),  # the paper's loop; SwapInspector (group_mixing) is drawn on the lock
        AdvantageHeatmap(batch, run["cfg"].algo),
        run["dash"],
    ]
    for w in widgets:
        assert to_html(w).startswith("<!DOCTYPE html>") and w.last_error is None, type(w).__name__
    viewer = widgets[0]
    expected = [r for t in trajs for r in rm.process_steps(t)]  # the generic progress, step by step
    assert viewer.frame["process_reward"].tolist() == pytest.approx(expected)
