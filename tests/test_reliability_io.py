"""Faults on the env and records side: prompt memory on long malformed observations, the batch runner
under hanging, dying and misbehaving envs, and readers of damaged run records."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import sys
import time

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from toy_env import SayOkThreeTimes, register_toy

from rspo_kit.envs import Observation, StepResult, Task, list_tasks, make_env, register_env
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.play import play
from rspo_kit.policy.prompts import (
    AlfworldMemory,
    ChainMemory,
    EpisodeContext,
    PromptConfig,
    WebShopMemory,
    _user_message,
)

# ---------------------------------------------------------------------------------------------- prompt memory


def _transcript(env_name: str, n_tasks: int, max_steps: int) -> list[str]:
    """The user messages of a few eval episodes: the expert's actions, every third one a random
    admissible action instead (detours, failed actions), as a tiny model's prompts show them."""
    env, rng, out = make_env(env_name), random.Random(0), []
    for task in list_tasks(env_name, split="eval", n=n_tasks):
        obs = env.reset(task)
        ctx = EpisodeContext(env_name, obs.instruction, obs.text, obs.admissible)
        for step in range(max_steps):
            out.append(_user_message(ctx, PromptConfig(), 2, True))
            expert = env.expert_action()
            options = [a for a in env.admissible_actions() if a != "search[...]"]
            action = rng.choice(options) if step % 3 == 2 and options else expert
            res = env.step(action)
            ctx.advance(action, res.obs.text, res.obs.admissible)
            if res.done:
                out.append(_user_message(ctx, PromptConfig(), 2, True))
                break
    return out


# sha256 of the transcripts' messages as the committed warm starts were trained on them
# (the ALFWorld one passes through arriving, opening, taking, moving, heating, cooling and cleaning)
PINNED_PROMPTS = {
    ("alfworld", 12, 30): (119, "0a4276cac3fc1c5be37210bdf9940c5e848421d06f2e52a9974d22a1e7b7754c"),
    ("webshop", 3, 20): (29, "46cb628d5c5b3339455948647c2c53ed3d83b0458d9f3f0088e1a6d692abf04b"),
    ("chain-4x2", 3, 20): (35, "0e9d780fc382cf18bff22dc055e640b88ef27f0b95148395e0639ba8b91d985c"),
}


def test_prompts_of_normal_episodes_are_byte_identical_to_the_pinned_ones():
    for (env_name, n_tasks, max_steps), (count, digest) in PINNED_PROMPTS.items():
        messages = _transcript(env_name, n_tasks, max_steps)
        assert len(messages) == count, env_name
        assert hashlib.sha256("\n\x00".join(messages).encode()).hexdigest() == digest, env_name


def test_an_over_budget_prompt_cuts_the_middle_of_the_observation_and_keeps_the_template_memory_and_task():
    from rspo_kit.policy.models import load_model
    from rspo_kit.policy.prompts import CUT_MARK, build_prompt

    _, tokenizer = load_model("tiny")
    ctx = EpisodeContext("alfworld", "put a mug in cabinet.", _START, ("look",))
    page = "You arrive at cabinet 1. " + "On the cabinet 1, you see a mug 1. " * 60
    ctx.advance("go to cabinet 1", page, ("look", "take mug 1 from cabinet 1"))
    whole = tokenizer.decode(build_prompt(ctx, tokenizer, PromptConfig(max_tokens=100_000)))
    for budget in (120, 200, 384):
        ids = build_prompt(ctx, tokenizer, PromptConfig(max_tokens=budget))
        text = tokenizer.decode(ids)
        assert budget - 12 <= len(ids) <= budget, budget  # cut close to the budget, not far below it
        assert text.split("Memory: ")[0] == whole.split("Memory: ")[0]  # the chat template's head
        assert f"Memory: {ctx.memory.render()}\nNow: You arrive at cabinet 1. On the cabinet 1" in text
        assert f" {CUT_MARK} " in text.split("\nNow: ")[1]  # the middle is cut, marked
        assert "you see a mug 1.\nTask: put a mug in cabinet.\nReply with the next action only." in text
    with pytest.raises(ValueError, match="max_tokens=10 is below the prompt template's own length"):
        build_prompt(ctx, tokenizer, PromptConfig(max_tokens=10))


# Pieces of observations that make backtracking patterns retry: list and sentence openings without
# their ends, separators, dots and line breaks in odd places.
_PIECES = [
    "On the cabinet 1, you see a mug 1. ",
    "On the ",
    ", you see",
    "In it, you see ",
    " from the ",
    " to the ",
    " using the ",
    "You pick up the ",
    "Looking quickly around you, you see ",
    "Your task is to: ",
    "a mug 1, ",
    " and ",
    ". ",
    ".",
    "\n",
    "Room 1 of ",
    "Wind blows from the ",
    " [SEP] ",
    "x",
    "\ud800",
]
_HEADS = [
    "You arrive at cabinet 1. ",
    "You open the drawer 1. ",
    "You pick up the ",
    "You move the ",
    "You heat the ",
    "-= Welcome =- Looking quickly around you, you see ",
    "",
]
_START = "Looking quickly around you, you see a cabinet 1, and a drawer 1.\n\nYour task is to: put a mug in cabinet."
SHORT_COPIES, LENGTH_RATIO, TIME_RATIO = 3, 100, 50


def _update_seconds(memory, observations: list[str]) -> float:
    """The least of three timings of updating ``memory`` with each observation and rendering it."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for observation in observations:
            memory.update("go to cabinet 1", observation).render()
            memory.show(observation, "put a mug in cabinet.")
        best = min(best, time.perf_counter() - start)
    return best


@settings(
    max_examples=15, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)  # fmt: skip
@given(st.sampled_from(_HEADS), st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5))
@example("You arrive at cabinet 1. ", ["On the cabinet 1, you see a mug 1. "])  # issue: 37 s at 800 copies
@example("You pick up the ", ["x", " from the "])
@example("", ["Looking quickly around you, you see ", "a mug 1, "])
def test_memory_update_time_is_linear_in_the_observation_length(head, pieces):
    """An observation ``LENGTH_RATIO`` times longer than a short one may take at most ``TIME_RATIO``
    times as long as ``LENGTH_RATIO`` updates with the short one (linear: about 1; quadratic: about
    ``LENGTH_RATIO``), for the memory of every env."""
    unit = "".join(pieces)
    short, long = head + unit * SHORT_COPIES, head + unit * (SHORT_COPIES * LENGTH_RATIO)
    for memory in (AlfworldMemory().update("", _START), WebShopMemory(), ChainMemory()):
        short_seconds = _update_seconds(memory, [short] * LENGTH_RATIO)
        long_seconds = _update_seconds(memory, [long])
        assert long_seconds <= TIME_RATIO * short_seconds, (type(memory).__name__, repr(unit[:80]))


# The patterns the linear helpers replace, as references on short texts.
_ROOM_LIST = re.compile(r"Looking quickly around you, you see (.*?)\.(?:\n|$)", re.S)
_CONTENTS_LIST = re.compile(r"(?:On the .+?, you see|In it, you see) (.*?)\.$", re.S)
_SENTENCE_PIECES = [*_PIECES, "On the desk 1", "In it", ", you see ", "The drawer 1 is open. ", ".\n", "\n\n"]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_SENTENCE_PIECES), max_size=8).map("".join))
def test_linear_list_finders_capture_what_the_patterns_capture(text):
    from rspo_kit.policy.prompts import _contents_list, _room_list

    room, contents = _ROOM_LIST.search(text), _CONTENTS_LIST.search(text)
    assert _room_list(text) == (room.group(1) if room else None)
    assert _contents_list(text) == (contents.group(1) if contents else None)


# ---------------------------------------------------------------------------------------------- batch runner


HANG_SECONDS = 20


class Misbehaving(SayOkThreeTimes):
    """A toy env with one misbehaviour per action; "ok" three times wins. "arm" makes its expert hang."""

    def reset(self, task: Task) -> Observation:
        self.expert_hangs = False
        return super().reset(task)

    def step(self, action: str):
        if action == "hang":
            time.sleep(HANG_SECONDS)
        if action == "none":
            return None
        if action == "tuple":
            return ("ok", True)
        if action == "exit":
            os._exit(3)
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if action == "sysexit":
            sys.exit(2)
        self.expert_hangs |= action == "arm"
        result = super().step(action)
        if action == "unpicklable":
            result.info["callback"] = lambda: 0  # a step result that cannot be sent back from a worker
        return result

    def expert_action(self) -> str:
        if self.expert_hangs:
            time.sleep(HANG_SECONDS)
        return super().expert_action()


register_toy("misbehaving", Misbehaving)


def _error(result: StepResult) -> str:
    assert result.done and not result.won and result.info["crashed"]
    return result.info["error"]


@pytest.mark.parametrize("n_workers", [0, 2])
def test_a_hanging_env_step_times_out_in_process_and_in_workers(n_workers):
    with BatchRunner("misbehaving", n_workers=n_workers, timeout_s=0.5) as runner:
        runner.reset(list_tasks("misbehaving"))
        start = time.monotonic()
        results = runner.step({0: "hang", 1: "ok"})
        took = time.monotonic() - start
        assert "no answer within" in _error(results[0]) and not results[1].done
        assert took < HANG_SECONDS / 2  # the hang was cut, not waited out
        assert "earlier" in _error(runner.step({0: "ok"})[0])  # the slot stays dead
        runner.step({1: "ok"})
        assert runner.step({1: "ok"})[1].won  # the rest of the batch carries on


@pytest.mark.parametrize("n_workers", [0, 2])
@pytest.mark.parametrize("bad", ["none", "tuple"])
def test_a_malformed_step_result_is_a_crashed_episode_with_its_reason(n_workers, bad):
    tasks = list_tasks("misbehaving")
    with BatchRunner("misbehaving", n_workers=n_workers) as runner:
        runner.reset(tasks)
        results = runner.step({0: bad, 1: "ok"})
        assert "Misbehaving.step returned" in _error(results[0]) and "not a StepResult" in _error(results[0])
        assert not results[1].done
        # a whole play through the runner (what evaluate does) ends the episode as a failure, not the run
        episodes = play(runner, tasks, lambda runner, obs: {s: bad if s == 0 else "ok" for s in obs})
        assert [e.won for e in episodes] == [False, True, True, True]


def test_an_env_calling_sys_exit_in_process_ends_only_its_episode():
    with BatchRunner("misbehaving", n_workers=0) as runner:
        runner.reset(list_tasks("misbehaving"))
        results = runner.step({0: "sysexit", 1: "ok"})
        assert "SystemExit" in _error(results[0]) and not results[1].done


@pytest.mark.parametrize(
    ("bad", "cause"), [("exit", "exit code 3"), ("kill", "signal 9 (SIGKILL)")]
)  # fmt: skip
def test_a_lost_worker_reports_its_exit_code_or_signal(bad, cause):
    with BatchRunner("misbehaving", n_workers=2) as runner:
        runner.reset(list_tasks("misbehaving"))
        results = runner.step({0: bad, 1: "ok", 2: "ok"})
        assert cause in _error(results[0]) and cause in _error(results[2]) and not results[1].done


def test_a_worker_whose_own_loop_fails_reports_the_exception(monkeypatch):
    import rspo_kit.envs.batch as batch

    def broken(self, op, items):
        raise RuntimeError("the worker loop broke")

    with BatchRunner("misbehaving", n_workers=2, start_method="fork") as runner:
        runner.reset(list_tasks("misbehaving"))
        monkeypatch.setattr(batch._Slots, "handle", broken)  # workers forked from here on inherit it
        runner._kill(0)
        error = _error(runner.step({0: "ok"})[0])
    assert (
        error.startswith("worker 0 lost (exit code 1): Traceback")
        and "RuntimeError: the worker loop broke" in error
    )


def test_an_unsendable_step_result_fails_its_episode_not_its_worker():
    with BatchRunner("misbehaving", n_workers=2) as runner:
        runner.reset(list_tasks("misbehaving"))
        results = runner.step({0: "unpicklable", 2: "ok"})
        assert "could not be sent" in _error(results[0]) and not results[2].done and runner.restarts == 0


def test_slots_of_a_worker_killed_after_an_expert_timeout_are_dead():
    with BatchRunner("misbehaving", n_workers=2, timeout_s=0.5) as runner:
        runner.reset(list_tasks("misbehaving"))
        runner.step({0: "arm", 1: "ok", 2: "ok", 3: "ok"})
        experts = runner.expert([0, 1, 2, 3])
        assert experts[0] is None and experts[2] is None and experts[1] == "ok" and runner.restarts == 1
        results = runner.step({0: "ok", 1: "ok", 2: "ok", 3: "ok"})
        for slot in (0, 2):  # both episodes of the killed worker: dead, and saying why
            assert "no answer within" in _error(results[slot]) and "AttributeError" not in _error(
                results[slot]
            )
        assert not results[1].done and not results[3].done


def test_an_expert_timeout_in_process_ends_that_episode_only():
    with BatchRunner("misbehaving", n_workers=0, timeout_s=0.5) as runner:
        runner.reset(list_tasks("misbehaving"))
        runner.step({0: "arm", 1: "ok"})
        assert runner.expert([0, 1]) == {0: None, 1: "ok"}
        results = runner.step({0: "ok", 1: "ok"})
        assert "no answer within" in _error(results[0]) and not results[1].done


def test_evaluate_counts_an_env_returning_none_as_a_failed_episode():
    from rspo_kit.policy.evaluate import evaluate
    from rspo_kit.policy.rollout import Policy

    class NoneOnSecondStep(Misbehaving):
        def step(self, action: str):
            return None if self.steps == 1 else super().step("ok")

    register_env(
        "none-on-second-step",
        make=NoneOnSecondStep,
        list_tasks=lambda split: [Task("none-on-second-step", "t0", split)],
        overwrite=True,
    )
    result = evaluate(Policy.load("tiny"), "none-on-second-step", n=1, n_workers=0, progress_bar=False)
    assert result.success == 0.0 and result.tasks == 1 and result.mean_steps == 2


# ---------------------------------------------------------------------------------------------- run records


def _metrics_lines(*rows: str) -> str:
    return "".join(row + "\n" for row in rows)


GOOD_ROW = '{"iteration": 0, "rollout/cumulative_env_steps": 0.0}'


@pytest.mark.parametrize(
    ("line", "problem"),
    [('{"iteration": 1, "loss": 0.5', "not valid JSON"), ("[1, 2]", "not a JSON object"), ("\x00garbage", "not valid JSON")],
)  # fmt: skip
def test_load_metrics_names_the_file_and_the_damaged_line(tmp_path, line, problem):
    from rspo_kit.records import RecordError, load_metrics

    (tmp_path / "metrics.jsonl").write_text(_metrics_lines(GOOD_ROW, line, GOOD_ROW))
    with pytest.raises(RecordError, match=problem) as err:
        load_metrics(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'metrics.jsonl'}, line 2: ")
    assert err.value.path == tmp_path / "metrics.jsonl" and err.value.line == 2
    assert isinstance(err.value, ValueError)  # callers that tolerate a row being written still do


def _damaged(path, keep: float = 0.5) -> None:
    """Cut ``path`` to a share of its bytes, as a killed writer or a full disk leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_turn_tables_and_final_episodes_name_the_damaged_parquet(tmp_path):
    import pandas as pd

    from rspo_kit.records import RecordError, load_episodes, load_turns, write_episodes, write_table

    write_table(
        pd.DataFrame({"iteration": [1, 1], "step": [0, 1]}), tmp_path / "turns" / "iter_00001.parquet"
    )
    _damaged(tmp_path / "turns" / "iter_00001.parquet")
    with pytest.raises(RecordError, match=re.escape("iter_00001.parquet: not a readable parquet table")):
        load_turns(tmp_path)
    episode = {"task_id": "a", "kind": "pick", "sample": 0, "won": True, "score": 1.0, "steps": 4}
    write_episodes(tmp_path, "final/eval", [episode])
    _damaged(tmp_path / "final_episodes.parquet")
    with pytest.raises(RecordError, match=re.escape("final_episodes.parquet: not a readable parquet table")):
        load_episodes(tmp_path)
    with pytest.raises(
        RecordError, match=re.escape("final_episodes.parquet")
    ):  # adding an evaluation reads it too
        write_episodes(tmp_path, "final/eval_unseen", [episode])


def test_start_and_results_records_name_the_damaged_file(tmp_path):
    from rspo_kit.records import RecordError, read_results, read_start

    (tmp_path / "start.json").write_text('{"source": "cache", ')
    with pytest.raises(RecordError, match=r"start.json, line 1: not valid JSON"):
        read_start(tmp_path)
    notebook = tmp_path / "cell.ipynb"
    cell = {
        "cell_type": "code",
        "outputs": [{"output_type": "stream", "name": "stdout", "text": "RSPO_RESULTS {x"}],
    }
    notebook.write_text(json.dumps({"cells": [cell]}))
    with pytest.raises(RecordError, match=re.escape("cell.ipynb: its RSPO_RESULTS line is not valid JSON")):
        read_results(notebook)


def test_checkpoint_json_records_name_the_file_and_what_is_wrong(tmp_path):
    """The readers that checkpoints' ``state.json``, ``replay.json.gz`` and a run's ``config.json`` use."""
    import gzip

    from rspo_kit.records import RecordError, read_json, read_json_gz, read_record, require_keys
    from rspo_kit.train.config import RunConfig

    replay = tmp_path / "replay.json.gz"
    with gzip.open(replay, "wt") as f:
        json.dump([{"task_id": str(i), "steps": list(range(50))} for i in range(200)], f)
    _damaged(replay)
    with pytest.raises(RecordError, match=re.escape("replay.json.gz: truncated or damaged")):
        read_json_gz(replay)
    (tmp_path / "state.json").write_text('{"iteration": 3}')
    state = read_json(tmp_path / "state.json")
    with pytest.raises(RecordError, match=r"state.json: missing key 'optimizers'"):
        require_keys(state, ("iteration", "optimizers"), tmp_path / "state.json")
    config = RunConfig().to_dict()
    config["algo"]["learning_rat"] = 1e-5
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RecordError, match=r"config.json: .*'learning_rat'"):
        read_record(tmp_path / "config.json", RunConfig.from_dict)
    with pytest.raises(FileNotFoundError):  # a missing file stays what it is
        read_json(tmp_path / "nothing.json")


def test_dashboard_from_run_names_the_damaged_metrics_file(tmp_path):
    pytest.importorskip("ipywidgets")
    from rspo_kit.records import RecordError
    from rspo_widgets.dashboard import TrainingDashboard

    (tmp_path / "metrics.jsonl").write_text(_metrics_lines(GOOD_ROW, '{"iteration": 1, "loss": nan'))
    with pytest.raises(RecordError, match=r"metrics.jsonl, line 2: not valid JSON"):
        TrainingDashboard.from_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text(_metrics_lines('{"loss": 0.5}'))
    with pytest.raises(RecordError, match=r"metrics.jsonl: .*'iteration'"):
        TrainingDashboard.from_run(tmp_path)


def _archived_sweep(out, metrics: str = GOOD_ROW, results: str = '{"final_eval_success": 0.5}'):
    cells = {f"variant={v}__train.seed=0": {"variant": v, "train.seed": 0} for v in ("plain", "rspo")}
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"keys": ["variant", "train.seed"], "cells": cells}))
    for name in cells:
        (out / name).mkdir()
        (out / name / "results.json").write_text(results)
        (out / name / "metrics.jsonl").write_text(_metrics_lines(GOOD_ROW, metrics))
    return out, next(iter(cells))


@pytest.mark.parametrize("damaged", ["results.json", "sweep.json"])
def test_load_sweep_names_the_damaged_file(tmp_path, damaged):
    from rspo_kit.experiments.aggregation import load_sweep
    from rspo_kit.records import RecordError

    out, cell = _archived_sweep(tmp_path / "sweep")
    path = out / damaged if damaged == "sweep.json" else out / cell / damaged
    _damaged(path, keep=0.8)
    with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}, line 1: not valid JSON"):
        load_sweep(out)


@pytest.mark.parametrize("damaged", ["metrics.jsonl", "results.json", "sweep.json"])
def test_report_names_the_damaged_file(tmp_path, capsys, damaged):
    from rspo_kit.experiments.report import main as report_main

    out, cell = _archived_sweep(tmp_path / "sweep")
    assert report_main([str(out), "--statistics"]) == 0
    path = out / damaged if damaged == "sweep.json" else out / cell / damaged
    _damaged(path, keep=0.8)
    capsys.readouterr()
    assert report_main([str(out), "--statistics"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {path}") and "not valid JSON" in error, error
