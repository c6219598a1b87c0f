"""ALFWorld: generated scenes on the real alfworld text engine, registered as ``"alfworld"``."""

from rspo_kit.envs.alfworld.engine import AlfworldEnv, game_file
from rspo_kit.envs.alfworld.scenes import TASK_TYPES, SceneKnobs, TaskSpec, generate_scene
from rspo_kit.envs.alfworld.splits import alfworld_tasks
from rspo_kit.envs.registry import register_env

register_env("alfworld", make=AlfworldEnv, list_tasks=alfworld_tasks, overwrite=True)

__all__ = [
    "TASK_TYPES",
    "AlfworldEnv",
    "SceneKnobs",
    "TaskSpec",
    "alfworld_tasks",
    "game_file",
    "generate_scene",
]
