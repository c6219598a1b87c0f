"""Text environments behind one protocol: ``make_env``, ``list_tasks``, ``register_env``,
``load_env_module``, and ``check_env`` to check that an env keeps the protocol."""

from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, TextEnv, normalize_command
from rspo_kit.envs.check import EnvCheckError, EnvCheckReport, check_env
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
    "EnvCheckError",
    "EnvCheckReport",
    "EnvModuleError",
    "EpisodeOverError",
    "Observation",
    "StepResult",
    "Task",
    "TextEnv",
    "UnknownEnvError",
    "check_env",
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
