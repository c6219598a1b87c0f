"""Registry (bring your own env, the example of docs/environments.md) and the crash-safe batch runner."""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from lock_env import register_lock
from toy_env import SayOkThreeTimes, register_toy

from rspo_kit.envs import (
    StepResult,
    TextEnv,
    list_tasks,
    make_env,
    register_env,
    valid_start,
)
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.play import expert_policy, play, success_table

EXAMPLE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "environments.md"


@pytest.fixture(scope="module")
def lock_env():
    """Runs the register_env example of docs/environments.md verbatim; it registers the env "lock"."""
    text = EXAMPLE_PAGE.read_text()
    block = re.search(r"<!-- register-env-example -->\s*```python\n(.*?)```", text, re.S)
    assert block, "docs/environments.md lost its register-env example"
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(block.group(1), "docs/environments.md", "exec"), namespace)
    return namespace["CombinationLock"]


def test_readme_example_registers_a_working_env(lock_env, capsys):
    env = make_env("lock")
    assert isinstance(env, TextEnv)
    tasks = list_tasks("lock", split="train")
    assert [t.meta["code"] for t in tasks] == ["12", "907", "3141"]
    assert list_tasks("lock", split="train", n=1) == tasks[:1]
    env.reset(tasks[1])
    res = env.step("press 4")
    assert res.valid and res.info["progress"] == {"digits": 0}
    assert not env.step("open sesame").valid


@pytest.mark.parametrize("n_workers", [0, 2])
def test_registered_env_runs_through_the_batch_runner(lock_env, n_workers):
    tasks = list_tasks("lock", split="train") + list_tasks("lock", split="eval")
    with BatchRunner("lock", n_workers=n_workers) as runner:
        episodes = play(runner, tasks, expert_policy, progress_bar=False)
    assert [e.won for e in episodes] == [True] * len(tasks)
    assert [e.steps for e in episodes] == [len(t.meta["code"]) for t in tasks]
    assert success_table(episodes)[-1]["success"] == 1.0


def test_registering_twice_needs_overwrite(lock_env):
    with pytest.raises(ValueError, match="already registered"):
        register_env("lock", make=lock_env, list_tasks=lambda split: [])
    with pytest.raises(TypeError):
        register_env("broken", make="not callable", list_tasks=lambda split: [])
    with pytest.raises(KeyError, match="registered envs"):
        make_env("no-such-env")


class Fragile(SayOkThreeTimes):
    """A toy env whose worker dies on "crash", hangs on "hang" and raises on "raise"."""

    commands = ("ok", "crash", "hang", "raise")

    def step(self, action: str) -> StepResult:
        if action == "crash":
            os._exit(3)
        if action == "hang":
            time.sleep(60)
        if action == "raise":
            raise RuntimeError("boom")
        return super().step(action)


register_toy("fragile", Fragile)


@pytest.mark.parametrize("bad_action", ["crash", "hang", "raise"])
def test_a_broken_worker_fails_its_episodes_and_the_batch_carries_on(bad_action):
    tasks = list_tasks("fragile")
    with BatchRunner("fragile", n_workers=2, timeout_s=2.0) as runner:
        runner.reset(tasks)
        # slot 0 lives in worker 0 with slot 2; slots 1 and 3 live in worker 1.
        results = runner.step({0: bad_action, 1: "ok", 2: "ok", 3: "ok"})
        assert results[0].done and not results[0].won and results[0].info["crashed"]
        assert not results[1].done and not results[3].done
        if bad_action == "raise":  # only the raising env's episode ends
            assert not results[2].done
        else:  # the whole worker is gone: its other episode ends too, the worker restarts
            assert results[2].info["crashed"] and runner.restarts == 1
        runner.step({1: "ok", 3: "ok"})
        final = runner.step({1: "ok", 3: "ok"})
        assert final[1].won and final[3].won  # the healthy worker's episodes finish normally
        assert bool(runner.step({2: "ok"})[2].info.get("crashed")) == (bad_action != "raise")
        # the runner recovers: a fresh batch on the same runner plays to the end
        episodes = play(runner, tasks, expert_policy, progress_bar=False)
        assert all(e.won for e in episodes)


def test_bad_runner_arguments():
    with pytest.raises(ValueError, match="n_workers"):
        BatchRunner("fragile", n_workers=-1)
    with pytest.raises(KeyError):
        BatchRunner("nope")


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
def test_valid_is_a_held_out_tail_of_train(env):
    train, valid = list_tasks(env, split="train"), list_tasks(env, split="valid")
    start = valid_start(env)
    assert valid == train[start:] and len(valid) == 240
    assert not {t.id for t in valid} & {t.id for t in list_tasks(env, split="train", n=start)}
    assert list_tasks(env, split="valid", n=5) == valid[:5]
    if env == "alfworld":  # task types interleave, so the tail holds each of the six equally
        assert set(Counter(t.kind for t in valid).values()) == {40}


def test_a_small_train_split_holds_out_a_fifth(lock_env):
    register_lock()  # "dial": 8 train tasks
    assert valid_start("dial") == 7
    assert list_tasks("dial", split="valid") == list_tasks("dial", split="train")[7:]


# ------------------------------------------------------------------ loading a user's env module
USER_MODULE = """
from rspo_kit.envs import Task, make_env, register_env


class Memory:
    pass


def tasks(split):
    return [Task("{name}", f"{name}/{{i}}", split, meta=t.meta) for i, t in enumerate(list_chain(split))]


def list_chain(split):
    from rspo_kit.envs import list_tasks

    return list_tasks("chain-4x2", split, n=2)


register_env("{name}", make=lambda **kw: make_env("chain-4x2", **kw), list_tasks=tasks, memory=Memory)
register_env("{name}-b", make=lambda **kw: make_env("chain-4x2", **kw), list_tasks=tasks)
"""


def write_module(folder: Path, module: str, env: str) -> Path:
    path = folder / f"{module}.py"
    path.write_text(USER_MODULE.format(name=env))
    return path


def test_an_env_module_loads_by_dotted_name_once(tmp_path, monkeypatch):
    from rspo_kit.envs import env_memory, load_env_module

    monkeypatch.syspath_prepend(str(tmp_path))
    write_module(tmp_path, "user_envs_dotted", "dotted")
    assert load_env_module("user_envs_dotted") == ["dotted", "dotted-b"]
    assert load_env_module("user_envs_dotted") == ["dotted", "dotted-b"]  # imported once, same answer
    assert [t.id for t in list_tasks("dotted", "eval")] == ["dotted/0", "dotted/1"]
    assert env_memory("dotted").__name__ == "Memory" and env_memory("dotted-b") is None
    assert env_memory("chain-4x2") is None and env_memory("no-such-env") is None


def test_an_env_module_loads_by_path_and_by_name_without_registering_twice(tmp_path, monkeypatch):
    from rspo_kit.envs import load_env_module

    path = write_module(tmp_path, "user_envs_path", "by-path")
    assert load_env_module(str(path)) == ["by-path", "by-path-b"]
    assert load_env_module(str(tmp_path / ".." / tmp_path.name / "user_envs_path.py")) == [
        "by-path",
        "by-path-b",
    ]
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_env_module("user_envs_path") == ["by-path", "by-path-b"]  # the module the file became
    assert make_env("by-path").reset(list_tasks("by-path", "eval")[0]).text


def test_an_env_module_that_fails_or_registers_nothing_says_so(tmp_path, monkeypatch):
    from rspo_kit.envs import EnvModuleError, load_env_module

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "user_envs_none.py").write_text("x = 1\n")
    (tmp_path / "user_envs_broken.py").write_text("import no_such_dependency\n")
    with pytest.raises(
        EnvModuleError, match=r"^env module 'user_envs_none' registered no env: call register_env"
    ):
        load_env_module("user_envs_none")
    with pytest.raises(
        EnvModuleError,
        match=r"^cannot import env module 'user_envs_broken': ModuleNotFoundError: No module named 'no_such_dependency'",
    ):
        load_env_module("user_envs_broken")
    with pytest.raises(EnvModuleError, match="does not exist"):
        load_env_module(str(tmp_path / "missing.py"))


def test_an_unknown_env_says_how_to_register_one():
    with pytest.raises(KeyError) as caught:
        make_env("no-such-env")
    message = str(caught.value)
    assert message.startswith("unknown env 'no-such-env'; registered envs: [")
    for door in ("--env-module", "ENV_MODULE", "load_env_module", "'rspo_kit.envs'"):
        assert door in message


def test_installed_entry_points_load_once_before_a_name_fails(tmp_path, monkeypatch):
    import importlib.metadata

    import rspo_kit.envs.registry as registry

    monkeypatch.syspath_prepend(str(tmp_path))
    write_module(tmp_path, "user_envs_installed", "installed")
    points = [
        importlib.metadata.EntryPoint("installed", "user_envs_installed", registry.ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("broken", "user_envs_no_such_module", registry.ENTRY_POINT_GROUP),
    ]
    asked = []

    def entry_points(group):
        asked.append(group)
        return points

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "_entry_point_failures", [])
    assert list_tasks("installed", "eval", n=1)[0].id == "installed/0"
    with pytest.raises(
        KeyError, match=r"entry points that failed to load: broken = user_envs_no_such_module"
    ):
        make_env("still-unknown")
    assert asked == [registry.ENTRY_POINT_GROUP]  # loaded once, not again for the second name
