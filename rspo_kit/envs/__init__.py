"""Text environments behind one protocol: ``make_env``, ``list_tasks``, ``register_env``."""

from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, TextEnv, normalize_command
from rspo_kit.envs.registry import SPLITS, list_tasks, make_env, register_env, registered_envs, valid_start

__all__ = [
    "SPLITS",
    "EpisodeOverError",
    "Observation",
    "StepResult",
    "Task",
    "TextEnv",
    "list_tasks",
    "make_env",
    "normalize_command",
    "register_env",
    "registered_envs",
    "valid_start",
]
