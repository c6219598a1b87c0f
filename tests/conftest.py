"""Shared fixtures. Tests use the project cache (generated games are reused between runs)."""

from __future__ import annotations

import pytest

from rspo_kit.envs import list_tasks, make_env
from rspo_kit.envs.alfworld.scenes import TASK_TYPES


@pytest.fixture(scope="session")
def alfworld_env():
    env = make_env("alfworld", engine="alfworld")  # the real engine
    yield env
    env.close()


@pytest.fixture(scope="session")
def eval_task_per_type():
    """The first eval task of each of the six task types."""
    by_type = {}
    for task in list_tasks("alfworld", split="eval"):
        by_type.setdefault(task.kind, task)
    assert set(by_type) == set(TASK_TYPES)
    return by_type
