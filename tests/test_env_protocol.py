"""The TextEnv protocol as written: ``check_env`` passes the built-in envs and the example of
docs/environments.md and names what a broken env breaks; the batch runner's defaults for an env
without ``info``."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from rspo_kit.envs import EnvCheckError, Observation, StepResult, Task, check_env, list_tasks, make_env
from rspo_kit.envs.base import reset_info, state_info
from rspo_kit.envs.batch import BatchRunner

EXAMPLE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "environments.md"


def documented_lock() -> tuple[type, list[Task]]:
    """The documented example's class and tasks, defined without registering (the example's own run, in
    test_registry_and_batch and test_docs, registers "lock" and calls check_env itself)."""
    block = re.search(r"<!-- register-env-example -->\s*```python\n(.*?)```", EXAMPLE_PAGE.read_text(), re.S)
    assert block, "docs/environments.md lost its register-env example"
    definitions = block.group(1).split("\nregister_env(")[0]
    namespace: dict = {"__name__": "documented_lock"}
    exec(compile(definitions, "docs/environments.md", "exec"), namespace)
    tasks = [t for split in ("train", "eval", "eval_unseen") for t in namespace["lock_tasks"](split)]
    return namespace["CombinationLock"], tasks


# ------------------------------------------------------------------------------ envs that pass
@pytest.mark.parametrize(
    "name, kwargs", [("alfworld", {"engine": "native"}), ("webshop", {}), ("chain-4x2", {})]
)
def test_the_builtin_envs_keep_the_protocol(name, kwargs):
    report = check_env(name, list_tasks(name, "eval", n=2), n_random=60, env_kwargs=kwargs)
    assert (report.tasks, report.random_steps) == (2, 120)
    assert report.expert_steps >= 2 and report.warnings == []


def test_the_readme_example_keeps_the_protocol():
    lock, tasks = documented_lock()
    report = check_env(lock, tasks, n_random=60)
    assert report.tasks == 6 and report.expert_steps == sum(len(t.meta["code"]) for t in tasks)
    assert report.warnings == []


# -------------------------------------------------------------------------- envs that break it
class Counter:
    """Press "up" ``goal`` times to win; a well-behaved env that the broken ones below change."""

    max_steps = 8

    def reset(self, task: Task) -> Observation:
        self.goal, self.count, self.steps = task.meta["goal"], 0, 0
        return self._obs("The counter shows 0.")

    def step(self, action: str) -> StepResult:
        self.steps += 1
        valid = action.strip().lower() in self.admissible_actions()
        self.count += valid and action.strip().lower() == "up"
        won = self.count >= self.goal
        text = f"The counter shows {self.count}." if valid else "Nothing happens."
        return StepResult(
            self._obs(text), won or self.steps >= self.max_steps, won, float(won), valid, self.info
        )

    @property
    def info(self) -> dict:
        return {"progress": {"count": self.count}, "anchor": self.count}

    def admissible_actions(self) -> list[str]:
        return ["up", "wait"]

    def expert_action(self) -> str:
        return "up"

    def _obs(self, text: str) -> Observation:
        return Observation(text, tuple(self.admissible_actions()), f"Count to {self.goal}.")


TASKS = [Task("counter", f"counter/{goal}", "train", meta={"goal": goal}) for goal in (1, 3)]


class Nondeterministic(Counter):
    def _obs(self, text: str) -> Observation:
        return super()._obs(f"{text} The wind blows at {random.random():.6f}.")


class RaisesOnBadInput(Counter):
    def step(self, action: str) -> StepResult:
        verb = action.split()[0]  # IndexError on "" and on whitespace
        return super().step(verb)


class LoopingExpert(Counter):
    def expert_action(self) -> str:
        return "wait"


class UncappedLoopingExpert(LoopingExpert):
    max_steps = 10**9


class GymStyleStep(Counter):
    def step(self, action: str):
        result = super().step(action)
        return result.obs, result.score, result.done, result.info


class ListAnchor(Counter):
    @property
    def info(self) -> dict:
        return {"progress": {"count": self.count, "note": "text"}, "anchor": [self.count]}


def failures(env: type, **kwargs) -> EnvCheckError:
    with pytest.raises(EnvCheckError) as caught:
        check_env(env, TASKS, n_random=40, **kwargs)
    return caught.value


def test_the_well_behaved_counter_passes():
    assert check_env(Counter, TASKS, n_random=40).tasks == 2


def test_a_nondeterministic_env_is_named_with_the_step_where_two_fresh_envs_differ():
    error = failures(Nondeterministic)
    assert {f.check for f in error.failures} == {"determinism"}
    assert {f.task for f in error.failures} <= {"counter/1", "counter/3"}
    assert "two fresh envs differ" in str(error) and "The wind blows" in str(error)


def test_an_env_that_raises_on_bad_input_names_the_input_and_the_exception():
    error = failures(RaisesOnBadInput)
    (failure,) = [f for f in error.failures if f.check == "arbitrary input" and f.task == "counter/1"]
    assert "step('') raised IndexError" in failure.message and failure.step >= 1
    assert "counter/1" in str(error) and "IndexError" in str(error)


def test_an_expert_that_loops_is_named_per_task():
    error = failures(LoopingExpert)
    lost = [f for f in error.failures if f.check == "expert wins"]
    assert [f.task for f in lost] == ["counter/1", "counter/3"]
    assert "ended after 8 steps without a win" in lost[0].message
    error = failures(UncappedLoopingExpert, max_steps=25)
    assert "did not finish within 25 steps" in str(error)


def test_a_step_of_the_wrong_type_is_named():
    error = failures(GymStyleStep)
    assert {f.check for f in error.failures} == {"step type"}
    assert "step returned (Observation(" in str(error) and "not a StepResult" in str(error)


def test_progress_that_is_not_numbers_and_an_unhashable_anchor_are_named():
    error = str(failures(ListAnchor))
    assert "env.info after reset: progress has values that are not numbers: {'note': 'text'}" in error
    assert "[anchor type] task counter/1, step 0: env.info after reset: anchor is a list" in error


def test_a_registered_env_is_checked_by_name_and_needs_tasks_otherwise():
    assert check_env("chain-4x2", n_random=10).tasks == 3  # its first three train tasks
    with pytest.raises(ValueError, match="needs tasks"):
        check_env(Counter)
    with pytest.raises(KeyError, match="--env-module"):
        check_env("no-such-env")


# --------------------------------------------------------------- the state after reset, by default
class NoInfo(Counter):
    """An env without ``info``, whose steps report progress but no anchor."""

    info = None

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        return StepResult(
            result.obs,
            result.done,
            result.won,
            result.score,
            result.valid,
            {"progress": {"count": self.count}},
        )


def test_without_info_the_runner_gives_empty_progress_and_the_observation_as_anchor():
    obs = Observation("The counter shows 0.", ("up",), "")
    assert state_info(None, obs) == {"progress": {}, "anchor": "The counter shows 0."}
    env = Counter()
    assert reset_info(env, env.reset(TASKS[1])) == {"progress": {"count": 0}, "anchor": 0}
    from rspo_kit.envs import register_env

    register_env("counter-noinfo", make=NoInfo, list_tasks=lambda split: TASKS, overwrite=True)
    with BatchRunner("counter-noinfo", n_workers=0) as runner:
        runner.reset(TASKS)
        assert runner.reset_info[0] == {"progress": {}, "anchor": "The counter shows 0."}
        step = runner.step({0: "up", 1: "up"})[1]
        assert step.info == {"progress": {"count": 1}, "anchor": "The counter shows 1."}
    assert check_env(NoInfo, TASKS, n_random=20).warnings == [
        "the env has no `info` attribute: each episode's first step has empty progress and the "
        "observation's text as its anchor",
        "no step reports info['anchor']: GiGPO's step groups fall back to observation texts",
    ]


def test_the_documented_lock_has_its_anchor_and_progress_on_the_first_step():
    lock, tasks = documented_lock()
    from rspo_kit.envs import register_env

    register_env("documented-lock", make=lock, list_tasks=lambda split: tasks, overwrite=True)
    with BatchRunner("documented-lock", n_workers=0) as runner:
        runner.reset(tasks[:1])
        assert runner.reset_info[0] == {"progress": {"digits": 0}, "anchor": ""}


@pytest.mark.parametrize("name", ["chain-4x2", "webshop"])
def test_a_builtin_env_after_reset_reads_as_its_info(name):
    task = list_tasks(name, "eval", n=1)[0]
    env = make_env(name)
    expected = dict(env.reset(task) and env.info)
    with BatchRunner(name, n_workers=0) as runner:
        runner.reset([task])
        assert runner.reset_info[0] == expected
