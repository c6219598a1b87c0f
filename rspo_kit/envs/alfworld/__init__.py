"""ALFWorld: generated scenes on two engines with identical transcripts, registered as ``"alfworld"``.

``make_env("alfworld")`` gives the native engine (pure Python, ~700x faster; the default since it
matched the real engine step for step on 1,000 differential episodes); ``engine="alfworld"`` gives the
real textworld/fast-downward engine, which official ALFWorld game files need.
"""

from typing import Literal

from rspo_kit.envs.alfworld.engine import AlfworldEnv, game_file
from rspo_kit.envs.alfworld.native import NativeAlfworldEnv
from rspo_kit.envs.alfworld.scenes import TASK_TYPES, SceneKnobs, TaskSpec, generate_scene
from rspo_kit.envs.alfworld.splits import alfworld_tasks
from rspo_kit.envs.registry import register_env

ENGINES = {"native": NativeAlfworldEnv, "alfworld": AlfworldEnv}


def make_alfworld(engine: Literal["native", "alfworld"] = "native", **kwargs):
    """An ALFWorld env on the chosen engine; other keyword arguments go to the engine (max_steps, expert)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {tuple(ENGINES)}, got {engine!r}")
    return ENGINES[engine](**kwargs)


register_env("alfworld", make=make_alfworld, list_tasks=alfworld_tasks, overwrite=True)

__all__ = [
    "ENGINES",
    "TASK_TYPES",
    "AlfworldEnv",
    "NativeAlfworldEnv",
    "SceneKnobs",
    "TaskSpec",
    "alfworld_tasks",
    "game_file",
    "generate_scene",
    "make_alfworld",
]
