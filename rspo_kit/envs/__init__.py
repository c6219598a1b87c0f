"""Text environments behind one protocol: ``make_env``, ``list_tasks``, ``register_env``,
``load_env_module``."""

from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, TextEnv, normalize_command
from rspo_kit.envs.registry import (
    SPLITS,
    EnvModuleError,
    UnknownEnvError,
    env_memory,
    list_tasks,
    load_env_module,
    load_env_modules,
    make_env,
    register_env,
    registered_envs,
    require_env,
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
    "UnknownEnvError",
    "env_memory",
    "list_tasks",
    "load_env_module",
    "load_env_modules",
    "make_env",
    "normalize_command",
    "register_env",
    "registered_envs",
    "require_env",
    "valid_start",
]
