"""The hard regime on ALFWorld: a warm start that never saw some task kinds, RL and evaluation on all of
them, and the report's split of every final evaluation into the kinds left out and the kinds shown."""

from __future__ import annotations

import json

import pytest

from rspo_kit.train import preset
from rspo_kit.train.config import PolicyConfig, RunConfig, SwapConfig, process_reward_use

LEFT_OUT = ("look_at_obj_in_light", "pick_two_obj_and_place")


# ------------------------------------------------------------------------------------------ config
def test_the_kinds_to_leave_out_are_a_tuple_of_names_from_code_text_and_json():
    cfg = preset("tiny", policy__sft_exclude_kinds="look_at_obj_in_light, pick_two_obj_and_place")
    assert cfg.policy.sft_exclude_kinds == LEFT_OUT
    assert preset("tiny", policy__sft_exclude_kinds=list(LEFT_OUT)).policy.sft_exclude_kinds == LEFT_OUT
    assert preset("tiny", policy__sft_exclude_kinds="").policy.sft_exclude_kinds == ()
    stored = json.loads(json.dumps(cfg.to_dict()))  # config.json holds a list
    assert RunConfig.from_dict(stored).policy.sft_exclude_kinds == LEFT_OUT
    with pytest.raises(
        ValueError, match=r"PolicyConfig.sft_exclude_kinds = 'look': must be a tuple of names"
    ):
        PolicyConfig(sft_exclude_kinds="look")
    with pytest.raises(ValueError, match=r"sft_exclude_kinds = .*must be distinct kinds"):
        PolicyConfig(sft_exclude_kinds=("a", "a"))
    with pytest.raises(ValueError, match=r"policy.sft_exclude_kinds = 3: must be names, comma-separated"):
        RunConfig().override("policy.sft_exclude_kinds", 3)


def test_leaving_kinds_out_keys_its_own_warm_start_and_leaves_every_other_key_as_it_was():
    from rspo_kit.train.setup import warmstart_key, warmstart_recipe

    plain = preset("alfworld-40k", policy__warmstart_from=None)
    assert "exclude_kinds" not in warmstart_recipe(plain)
    hard = preset("alfworld-40k", policy__warmstart_from=None, policy__sft_exclude_kinds=LEFT_OUT)
    assert warmstart_recipe(hard)["exclude_kinds"] == sorted(LEFT_OUT)
    assert warmstart_key(hard) != warmstart_key(plain)
    swapped = preset("alfworld-40k", policy__warmstart_from=None, policy__sft_exclude_kinds=LEFT_OUT[::-1])
    assert warmstart_key(swapped) == warmstart_key(hard)  # a set of kinds: the order names no other start


# ------------------------------------------------------------------------------------ demonstrations
def test_the_demonstrations_leave_the_kinds_out_and_keep_their_number():
    from rspo_kit.envs.registry import list_tasks
    from rspo_kit.policy.sft import demonstration_tasks

    assert demonstration_tasks("alfworld", 40) == list_tasks("alfworld", "train", n=40)
    tasks = demonstration_tasks("alfworld", 40, LEFT_OUT)
    assert len(tasks) == 40 and len({t.id for t in tasks}) == 40
    assert {t.kind for t in tasks} == {t.kind for t in list_tasks("alfworld", "train")} - set(LEFT_OUT)
    with pytest.raises(
        ValueError, match="no task kind 'pick_three' in alfworld; its kinds: look_at_obj_in_light"
    ):
        demonstration_tasks("alfworld", 40, ["pick_three"])
    every = sorted({t.kind for t in list_tasks("alfworld", "train")})
    with pytest.raises(ValueError, match="leaves no train task of alfworld"):
        demonstration_tasks("alfworld", 40, every)


def test_a_run_names_the_field_when_a_kind_is_wrong_before_any_warm_start(tmp_path, monkeypatch):
    import rspo_kit.train.setup as setup_module

    monkeypatch.setattr(setup_module, "cache_dir", lambda: tmp_path / "cache")
    cfg = preset("alfworld-40k", policy__sft_exclude_kinds=("look_at_obj_in_light", "pick_three"))
    with pytest.raises(ValueError, match=r"policy.sft_exclude_kinds = .*no task kind 'pick_three'"):
        setup_module.initial_policy(cfg, progress_bar=False)
    assert not (tmp_path / "cache").exists()  # nothing installed, nothing trained


def test_the_warm_start_learns_from_the_other_kinds_only(tmp_path, monkeypatch):
    import rspo_kit.policy.sft as sft_module
    import rspo_kit.train.setup as setup_module

    monkeypatch.setattr(setup_module, "cache_dir", lambda: tmp_path / "cache")
    seen = []
    real = sft_module.warm_start

    def recorded(policy, runner, tasks, cfg, **kwargs):
        seen.extend(tasks)
        return real(policy, runner, tasks, cfg, **kwargs)

    monkeypatch.setattr(sft_module, "warm_start", recorded)
    cfg = preset(
        "smoke",
        env="alfworld",
        policy__warmstart=True,
        policy__sft_updates=1,
        policy__sft_demo_tasks=8,
        policy__sft_exclude_kinds=LEFT_OUT,
    )
    _, report = setup_module.initial_policy(cfg, progress_bar=False)
    assert report["cached"] is False and report["sft_updates"] == 1
    assert len(seen) == 8 and not {t.kind for t in seen} & set(LEFT_OUT)
    assert len({t.kind for t in seen}) == 4


def test_the_warmstart_cli_refuses_a_kind_the_env_lacks(capsys):
    from rspo_kit.policy.warmstart import main

    with pytest.raises(SystemExit) as stop:
        main(["--env", "alfworld", "--exclude-kinds", "look_at_obj_in_light,pick_three"])
    assert stop.value.code == 2
    assert "--exclude-kinds: no task kind 'pick_three' in alfworld" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ report
TASK_KINDS = ("look", "pick", "two", "pick")  # tasks t0..t3 of a synthetic final/eval


def _episodes(wins: list[int]) -> list[dict]:
    return [
        {"task_id": f"t{i}", "kind": k, "sample": 0, "won": bool(w), "score": float(w), "steps": 5}
        for i, (k, w) in enumerate(zip(TASK_KINDS, wins, strict=True))
    ]


def _kind_sweep(out, parameters: dict):
    """An archived sweep of variant × seed under ``parameters`` whose cells recorded final episodes:
    RSPO wins one of the two left-out tasks (t0, t2) each seed, plain none; on the others they tie
    on average."""
    from rspo_kit.experiments.grid import plan
    from rspo_kit.records import write_episodes

    won = {"rspo": [[1, 1, 0, 1], [0, 1, 1, 0]], "plain": [[0, 1, 0, 1], [0, 0, 0, 1]]}
    grid = {"variant": list(won), "train.seed": [0, 1]}
    cells = {c.name: c.params for c in plan(grid, out)}
    out.mkdir()
    manifest = {"keys": list(grid), "cells": cells, "parameters": parameters}
    (out / "sweep.json").write_text(json.dumps(manifest))
    for name, params in cells.items():
        wins = won[params["variant"]][params["train.seed"]]
        (out / name).mkdir()
        (out / name / "results.json").write_text(json.dumps({"final_eval_success": sum(wins) / 4}))
        write_episodes(out / name, "final/eval", _episodes(wins))
    write_episodes(out / "warmstart_run", "final/eval", _episodes([0, 1, 0, 0]))
    return out


def _section(lines: list[str], head: str, rows: int) -> dict[str, dict[str, str]]:
    """The Markdown table under the line starting with ``head``: {row name: {header: cell}}, a row
    named by its first column, and by its evaluation too where the table has one."""
    first = next(i for i, line in enumerate(lines) if line.startswith(head))
    table = [[c.strip() for c in line.strip("|").split("|")] for line in lines[first + 2 : first + 4 + rows]]
    header, _, *body = table
    named = [
        row[0] + (f" {row[header.index('evaluation')]}" if "evaluation" in header else "") for row in body
    ]
    return {name: dict(zip(header, row, strict=True)) for name, row in zip(named, body, strict=True)}


def test_report_by_kind_splits_the_final_evaluations_into_kinds_left_out_and_kinds_shown(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    fixed = {"PRESET": "alfworld-40k", "policy.sft_exclude_kinds": "two,look"}
    sweep = _kind_sweep(tmp_path / "sweep", fixed)
    argv = [
        str(sweep),
        "--by-kind",
        "--paired",
        "variant=rspo,plain",
        "--reference",
        str(sweep / "warmstart_run"),
    ]
    assert report_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    kinds = _section(lines, "By task kind: the kinds the warm start left out (look, two)", 2)
    # left out (t0, t2): RSPO 1/2 both seeds, plain 0; shown (t1, t3): 2/2 and 1/2 for both, whose
    # mean 75 has sd 35.36, se 25 and t(1) = 12.706: ±317.66
    assert kinds["rspo"]["final_eval_left_out_kinds_success"] == "50.0 / 50.0 → 50.0 [50.0, 50.0]"
    assert kinds["plain"]["final_eval_left_out_kinds_success"] == "0.0 / 0.0 → 0.0 [0.0, 0.0]"
    assert kinds["rspo"]["final_eval_sft_kinds_success"] == "100.0 / 50.0 → 75.0 [-242.6, 392.6]"
    assert kinds["plain"]["final_eval_sft_kinds_success"] == kinds["rspo"]["final_eval_sft_kinds_success"]
    assert (
        "The reference run: final_eval_left_out_kinds_success 0.0, final_eval_sft_kinds_success 50.0."
        in lines
    )
    # task by task, rspo − plain: t0 and t2 +0.5 each (won only by RSPO: seed 0's t0, seed 1's t2);
    # t1 +0.5 and t3 −0.5 (seed 1 each way): mean 0, sd 0.707, se 0.5, t(1) = 12.706: ±635.3
    paired = _section(lines, "Paired by seed and task", 2)
    left, shown = (
        paired["variant=rspo − variant=plain final/eval:left_out_kinds"],
        paired["variant=rspo − variant=plain final/eval:sft_kinds"],
    )
    assert (left["tasks"], left["episodes won only by a / b"], left["success"]) == (
        "2",
        "2 / 0",
        "+50.0 [+50.0, +50.0]",
    )
    assert (shown["tasks"], shown["episodes won only by a / b"], shown["success"]) == (
        "2",
        "1 / 1",
        "+0.0 [-635.3, +635.3]",
    )
    against = next(i for i, line in enumerate(lines) if line.startswith("Against the reference run"))
    assert any("final/eval:left_out_kinds" in line for line in lines[against : against + 8])

    # the kinds named on the command line give the same split; a kind no episode has is an error
    assert report_main([str(sweep), "--by-kind", "look,two"]) == 0
    assert "| rspo | 0, 1 | 50.0 / 50.0 → 50.0 [50.0, 50.0] |" in capsys.readouterr().out
    assert report_main([str(sweep), "--by-kind", "lamp"]) == 2
    assert (
        "no final episode is of a kind left out (lamp); the episodes' kinds: look, pick, two"
        in capsys.readouterr().err
    )


def test_report_by_kind_needs_kinds_where_the_warm_start_left_none_out(tmp_path, capsys):
    from rspo_kit.experiments.report import main as report_main

    sweep = _kind_sweep(tmp_path / "sweep", {"PRESET": "alfworld-40k"})
    assert report_main([str(sweep), "--by-kind"]) == 2
    assert "left no task kind out (policy.sft_exclude_kinds is empty)" in capsys.readouterr().err
    assert report_main([str(sweep)]) == 0
    assert "By task kind" not in capsys.readouterr().out  # no split unless asked


def test_the_kind_figure_shows_each_half_of_each_evaluation_over_the_seeds_beside_the_warm_start(tmp_path):
    import plotly.graph_objects as go

    from rspo_kit.experiments.aggregation import aggregate
    from rspo_kit.experiments.by_kind import (
        kind_figure,
        kind_frame,
        kind_halves,
        kind_record,
        kind_summary,
        left_out_kinds,
    )
    from rspo_kit.experiments.pooling import cell_episodes, pooled_sweep
    from rspo_kit.records import load_episodes

    sweep = _kind_sweep(
        tmp_path / "sweep", {"PRESET": "alfworld-40k", "policy.sft_exclude_kinds": "two,look"}
    )
    manifest, _, folders = pooled_sweep([sweep])
    left_out = left_out_kinds([sweep], manifest)
    assert left_out == ("look", "two")
    table = aggregate(sweep)
    frame = kind_frame(table, cell_episodes(folders, list(table["cell"])), left_out, ["variant"])
    assert len(frame) == 4 * 2  # 4 cells × 1 evaluation × 2 halves
    assert frame["episodes"].tolist() == [2] * 8
    summary = kind_summary(frame, ["variant"])
    assert summary["half"].tolist() == ["left_out_kinds"] * 2 + ["sft_kinds"] * 2  # the kinds left out first
    rows = {(r["variant"], r["half"]): r for r in summary.to_dict("records")}
    assert rows["rspo", "left_out_kinds"]["values"] == [0.5, 0.5]
    assert rows["plain", "left_out_kinds"]["values"] == [0.0, 0.0]
    shown = rows["rspo", "sft_kinds"]  # 2/2 and 1/2: mean 0.75, ±3.1765 (t(1) = 12.706, se 0.25)
    assert shown["seeds"] == 2 and shown["values"] == [1.0, 0.5]
    assert (shown["ci_low"], shown["ci_high"]) == pytest.approx((-2.4265, 3.9265))
    assert kind_record(summary, ["variant"])["rspo"] == {
        "left_out_kinds final/eval": 0.5,
        "sft_kinds final/eval": 0.75,
    }

    start = kind_halves(load_episodes(sweep / "warmstart_run"), left_out)
    spec = kind_figure(summary, ["variant"], start)
    fig = go.Figure(spec)  # plotly checks every property of the spec
    bars = {(t.name, t.xaxis): t for t in fig.data}
    assert set(bars) == {(n, x) for n in ("warm start", "rspo", "plain") for x in ("x", "x2")}
    assert bars["warm start", "x"].y == (0.0,) and bars["warm start", "x2"].y == (0.5,)
    assert bars["rspo", "x"].x == ("eval, greedy",) and bars["rspo", "x"].y == (0.5,)
    assert bars["rspo", "x2"].error_y.array[0] == pytest.approx(3.1765)
    assert [t.showlegend for t in fig.data if t.xaxis == "x2"] == [False] * 3  # one legend entry a group
    assert fig.layout.xaxis.title.text == "kinds left out" and fig.layout.xaxis2.title.text == "kinds shown"

    # a single seed draws no interval; no kind left out is an empty tuple, not an error
    one = kind_summary(frame[frame["train.seed"] == 0], ["variant"])
    assert go.Figure(kind_figure(one, ["variant"])).data[0].error_y.visible is False
    assert bars["rspo", "x2"].error_y.visible is True
    bare = _kind_sweep(tmp_path / "bare", {"PRESET": "alfworld-40k"})
    assert left_out_kinds([bare], pooled_sweep([bare])[0]) == ()
    with pytest.raises(ValueError, match="no task kind to split by"):
        kind_frame(table, {}, (), ["variant"])


def _turns(rows: list[tuple[str, int, str, bool, list[int]]], iteration: int = 1):
    """A turn table of episodes (role, traj_id, kind, won, subgoals done after each step; 4 in all)."""
    import pandas as pd

    from rspo_kit.records.tables import TURN_COLUMNS

    turns = [
        {
            "iteration": iteration,
            "role": role,
            "group_id": traj // 2,
            "task_id": f"t{traj}",
            "kind": kind,
            "traj_id": traj,
            "step": step,
            "won": won,
            "progress": json.dumps({"subgoals_done": done, "subgoals_total": 4}),
        }
        for role, traj, kind, won, progress in rows
        for step, done in enumerate(progress)
    ]
    return pd.DataFrame(turns).reindex(columns=list(TURN_COLUMNS))


def _slow_rollout_kinds(turns, left_out) -> dict:
    """rollout_kinds by hand: episode by episode, in plain Python."""
    episodes: dict[tuple, dict] = {}
    for r in turns.to_dict("records"):
        key = (r["role"], r["iteration"], r["group_id"], r["traj_id"])
        fields = json.loads(r["progress"])
        share = fields["subgoals_done"] / fields["subgoals_total"]
        half = "left_out_kinds" if r["kind"] in left_out else "sft_kinds"
        e = episodes.setdefault(key, {"half": half, "won": r["won"], "best": share})
        e["best"] = max(e["best"], share)
    out: dict[tuple, list] = {}
    for (role, *_), e in episodes.items():
        out.setdefault((role, e["half"]), []).append(e)
    return {k: (len(v), sum(e["won"] for e in v), sum(e["best"] for e in v) / len(v)) for k, v in out.items()}


def test_rollout_kinds_counts_each_roles_episodes_by_half_as_a_loop_over_episodes_does():
    import random

    import pandas as pd

    from rspo_kit.experiments.by_kind import rollout_kinds

    rng = random.Random(0)
    rows = [
        (
            rng.choice(["actor", "explorer", "replay"]),
            i,
            rng.choice("abc"),
            rng.random() < 0.3,
            [rng.randrange(5) for _ in range(rng.randrange(1, 6))],
        )
        for i in range(60)
    ]
    turns = pd.concat([_turns(rows[:30], 1), _turns(rows[30:], 2)], ignore_index=True)
    fast = rollout_kinds(turns, ["a"])
    slow = _slow_rollout_kinds(turns, {"a"})
    assert len(fast) == len(slow)
    for r in fast.to_dict("records"):
        episodes, won, reached = slow[r["role"], r["half"]]
        assert (r["episodes"], r["won"]) == (episodes, won)
        assert r["success"] == pytest.approx(won / episodes) and r["subgoals_reached"] == pytest.approx(
            reached
        )


def test_report_by_kind_shows_the_training_rollouts_where_the_cells_kept_their_turn_tables(tmp_path, capsys):
    from rspo_kit.experiments.archive import archive_sweep
    from rspo_kit.experiments.report import main as report_main
    from rspo_kit.records.tables import write_table

    sweep = _kind_sweep(
        tmp_path / "sweep", {"PRESET": "alfworld-40k", "policy.sft_exclude_kinds": "two,look"}
    )
    # RSPO seed 0: its actor fails both left-out episodes (reaching 1 and 3 of 4 subgoals), its explorer
    # wins one of them; it wins its shown one
    rspo = [
        ("actor", 0, "look", False, [0, 1]),
        ("actor", 1, "two", False, [3, 2]),
        ("actor", 2, "pick", True, [4]),
        ("explorer", 3, "look", True, [2, 4]),
    ]
    (sweep / "variant=rspo__train.seed=0" / "turns").mkdir()
    write_table(_turns(rspo), sweep / "variant=rspo__train.seed=0" / "turns" / "iter_00001.parquet")
    assert report_main([str(sweep), "--by-kind"]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Training rollouts by task kind"))
    assert lines[first + 2 : first + 7] == [
        "| variant | train.seed | role | half | episodes | won | success | subgoals_reached |",
        "|---|---|---|---|---|---|---|---|",
        "| rspo | 0 | actor | left_out_kinds | 2 | 0 | 0.0 | 50.0 |",  # the best of each: 1/4 and 3/4
        "| rspo | 0 | actor | sft_kinds | 1 | 1 | 100.0 | 100.0 |",
        "| rspo | 0 | explorer | left_out_kinds | 1 | 1 | 100.0 | 100.0 |",
    ]
    archive_sweep(sweep, tmp_path / "archive")  # archives keep no turn tables: no such table
    assert report_main([str(tmp_path / "archive"), "--by-kind"]) == 0
    assert "Training rollouts" not in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ preset
def test_the_hard_preset_is_the_alfworld_protocol_with_two_kinds_left_out_of_its_warm_start():
    import dataclasses

    from rspo_kit.envs.registry import list_tasks

    hard, base = preset("alfworld-hard", algo="grpo"), preset("alfworld-40k", algo="grpo")
    assert set(hard.policy.sft_exclude_kinds) < {t.kind for t in list_tasks("alfworld", "train")}
    assert len(hard.policy.sft_exclude_kinds) == 2
    for section in ("env", "reward", "algo", "swap", "train"):  # budget, lr, cap, evaluations, explorer
        assert getattr(hard, section) == getattr(base, section), section
    differ = {
        f.name
        for f in dataclasses.fields(hard.policy)
        if getattr(hard.policy, f.name) != getattr(base.policy, f.name)
    }
    assert differ <= {"sft_exclude_kinds", "warmstart_from"}
    assert hard.swap.sync_every == SwapConfig().sync_every  # the config default: the regime map sets it
    assert hard.swap.loop_steps == SwapConfig().loop_steps  # the paper's loop at its default k
    control = preset("alfworld-hard", swap="control")
    # the control is the paper's loop with no explorer steps (B = A): no dense reward is used anywhere
    assert control.swap.mode == "control" and process_reward_use(control) is None


def test_the_hard_preset_starts_from_its_committed_warm_start_which_never_wins_the_kinds_left_out():
    from rspo_kit.paths import repository_path
    from rspo_kit.records import load_episodes
    from rspo_kit.train.setup import warmstart_recipe

    cfg = preset("alfworld-hard")
    folder = repository_path(cfg.policy.warmstart_from)
    assert json.loads((folder.parent / "recipe.json").read_text()) == warmstart_recipe(cfg)
    episodes = load_episodes(folder.parent / "evaluation")
    assert len(episodes) == 4 * 120  # eval and eval_unseen, greedy and sampled
    left_out = episodes[episodes["kind"].isin(cfg.policy.sft_exclude_kinds)]
    shown = episodes[~episodes["kind"].isin(cfg.policy.sft_exclude_kinds)]
    assert len(left_out) == 4 * 40 and not left_out["won"].any()
    assert shown.groupby("evaluation")["won"].mean().min() > 0.2
