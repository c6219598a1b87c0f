"""Faults on the env and records side: prompt memory on long malformed observations, the batch runner
under hanging, dying and misbehaving envs, and readers of damaged run records."""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
import sys
import time

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

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


class Misbehaving:
    """A toy env with one misbehaviour per action; "ok" three times wins. "arm" makes its expert hang."""

    def reset(self, task: Task) -> Observation:
        self.steps, self.expert_hangs = 0, False
        return Observation("ready", ("ok",), "say ok three times")

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
        self.steps += 1
        won = self.steps == 3
        info = {"progress": {}, "anchor": "", "callback": (lambda: 0) if action == "unpicklable" else None}
        return StepResult(Observation("ok", ("ok",), ""), won, won, float(won), True, info)

    def admissible_actions(self) -> list[str]:
        return ["ok"]

    def expert_action(self) -> str:
        if self.expert_hangs:
            time.sleep(HANG_SECONDS)
        return "ok"


register_env(
    "misbehaving",
    make=Misbehaving,
    list_tasks=lambda split: [Task("misbehaving", f"misbehaving/{i}", split) for i in range(4)],
    overwrite=True,
)


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
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.evaluate import evaluate

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
