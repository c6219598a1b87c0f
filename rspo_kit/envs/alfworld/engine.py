"""ALFWorld on the real text engine: textworld's PddlEnv wrapped by alfworld's own wrappers.

One ``AlfworldEnv`` keeps one PddlEnv (and so one private copy of fast-downward) for its lifetime and
loads a new game at every ``reset``. The planner runs once at reset (the walkthrough); the expert
follows it and replans only after the agent leaves it. Any string is a legal action: it is
lower-cased and whitespace-collapsed, then handed to the engine, which answers ``Nothing happens.``
to anything it does not know.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from rspo_kit.envs.alfworld.episode import AlfworldEpisode
from rspo_kit.envs.alfworld.scenes import TaskSpec, write_game
from rspo_kit.envs.alfworld.state import GoalInfo, world_from_facts
from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, normalize_command
from rspo_kit.paths import alfworld_data_dir, cache_dir

GENERATOR_VERSION = "v1"  # bump when scenes.py changes what it writes; old caches are then ignored
INVALID_FEEDBACK = "Nothing happens."


def games_root() -> Path:
    return cache_dir() / "alfworld" / "games" / GENERATOR_VERSION


def game_file(task: Task) -> Path:
    """The ``game.tw-pddl`` of a task, generated and cached on first use."""
    if "game_file" in task.meta:
        return Path(task.meta["game_file"])
    if "spec" not in task.meta:
        raise ValueError(f"alfworld task {task.id!r} has neither meta['spec'] nor meta['game_file']")
    return write_game(TaskSpec.from_dict(task.meta["spec"]), games_root())


class AlfworldEnv(AlfworldEpisode):
    """The TextEnv for ALFWorld on the real textworld engine (``make_env("alfworld", engine="alfworld")``)."""

    engine = "alfworld"

    def __init__(self, max_steps: int = 50, expert: Literal["planner", "handcoded"] = "planner") -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if expert not in ("planner", "handcoded"):
            raise ValueError(f"expert must be 'planner' or 'handcoded', got {expert!r}")
        self.max_steps, self.expert = max_steps, expert
        alfworld_data_dir()  # sets ALFWORLD_DATA before alfworld is imported
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos
        from textworld.envs.pddl import PddlEnv

        infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=True, extras=["walkthrough"])
        env = AlfredInfos(AlfredDemangler(PddlEnv(infos)))
        if expert == "handcoded":
            # alfworld 0.4.2 passes expert_type positionally by mistake; give it by keyword.
            env = AlfredExpert(env, expert_type="handcoded")
        self._env = env
        self.task: Task | None = None
        self._done = True

    # ------------------------------------------------------------------ protocol

    def reset(self, task: Task) -> Observation:
        path = game_file(task)
        traj = json.loads((path.parent / "traj_data.json").read_text())
        self._env.load(str(path))
        state = self._env.reset()
        self.task, self.goal = task, GoalInfo.from_traj_data(traj)
        self.instruction = _instruction(state.feedback)
        self.steps, self._done, self.history = 0, False, []
        self._state = state
        self._world = world_from_facts(state["facts"])
        self._begin(list(state["extra.walkthrough"]))
        self.last_obs = self._observation(state.feedback)
        return self.last_obs

    def step(self, action: str) -> StepResult:
        if self._done:
            raise EpisodeOverError("the episode is over; call reset() before step()")
        command = normalize_command(action)
        valid = command in self._state["admissible_commands"]
        state, _, _ = self._env.step(command)
        self._state, self.steps = state, self.steps + 1
        self._world = world_from_facts(state["facts"])
        self._observe(command, valid)
        won = bool(state["won"])
        timeout = not won and self.steps >= self.max_steps
        self._done = won or timeout
        self.history.append(command)
        self.last_obs = self._observation(state.feedback)
        info = self._step_info(command, self.steps, timeout)
        return StepResult(self.last_obs, self._done, won, float(won), valid, info)

    def admissible_actions(self) -> list[str]:
        return list(self._state["admissible_commands"]) if self.task is not None else []

    def expert_action(self) -> str | None:
        """Next action of an optimal expert (the planner), or None once the episode is over."""
        if self.expert == "handcoded" and not self._done:
            return self._state["extra.expert_plan"][0]
        pddl = self._env.unwrapped
        return self._next_planned(lambda: pddl._pddl_state.replan(pddl._entity_infos))

    # ------------------------------------------------------------------ helpers

    def _observation(self, text: str) -> Observation:
        return Observation(text, tuple(self._state["admissible_commands"]), self.instruction)

    def close(self) -> None:
        self._env.close()


def _instruction(intro: str) -> str:
    marker = "Your task is to: "
    return intro[intro.index(marker) + len(marker) :].strip() if marker in intro else ""
