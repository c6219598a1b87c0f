"""Text environments behind one protocol: ``make_env``, ``list_tasks``, ``register_env``,
``load_env_module``."""

from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, TextEnv, normalize_command
from rspo_kit.envs.registry import (
    SPLITS,
    EnvModuleError,
    env_memory,
    list_tasks,
    load_env_module,
    make_env,
    register_env,
    registered_envs,
    valid_start,
)

__all__ = [
    "SPLITS",
    "EnvModuleError",
    "EpisodeOverError",
    "Observation",
    "StepResult",
    "Task",
    "TextEnv",
    "env_memory",
    "list_tasks",
    "load_env_module",
    "make_env",
    "normalize_command",
    "register_env",
    "registered_envs",
    "valid_start",
]
