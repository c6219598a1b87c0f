"""A two-digit combination lock: a tiny env where a random policy wins often enough to learn from.

Registered as ``dial`` with ``subgoal`` (a new correct digit) and ``hack`` (any press) process
rewards, so the trainer's tests can check learning in seconds on any algorithm and variant. (Not
``lock``: the register-env example of docs/environments.md, tested verbatim, registers that name.)
"""

from __future__ import annotations

from rspo_kit.envs import Observation, StepResult, Task, register_env
from rspo_kit.rewards.process import register_process_reward

CODES = ["12", "13", "21", "23", "31", "32", "11", "22"]


class CombinationLock:
    def __init__(self, max_steps: int = 6):
        self.max_steps = max_steps

    def reset(self, task: Task) -> Observation:
        self.code, self.entered, self.steps = task.meta["code"], "", 0
        return self._obs("The dial is at the start.")

    def step(self, action: str) -> StepResult:
        self.steps += 1
        valid = action.strip().lower() in self.admissible_actions()
        if valid:
            pressed = self.entered + action.split()[-1]
            self.entered = pressed if self.code.startswith(pressed) else ""
        won = self.entered == self.code
        info = {"progress": {"digits": len(self.entered), "presses": self.steps}, "anchor": self.entered}
        obs = self._obs("Click." if valid else "Nothing happens.")
        return StepResult(obs, won or self.steps >= self.max_steps, won, float(won), valid, info)

    def admissible_actions(self) -> list[str]:
        return ["press 1", "press 2", "press 3"]

    def expert_action(self) -> str:
        return f"press {self.code[len(self.entered)]}"

    def _obs(self, text: str) -> Observation:
        return Observation(text, tuple(self.admissible_actions()), "open the lock")

    def close(self) -> None:
        pass


def lock_tasks(split: str) -> list[Task]:
    return [Task("dial", f"dial/{split}/{i}", split, "lock", {"code": c}) for i, c in enumerate(CODES)]


def register_lock() -> None:
    register_env("dial", make=lambda **kw: CombinationLock(**kw), list_tasks=lock_tasks, overwrite=True)

    @register_process_reward("dial", "subgoal")
    def lock_subgoal(before, after, action, valid, info) -> float:
        return 0.5 * max(0, after.get("digits", 0) - before.get("digits", 0))

    @register_process_reward("dial", "hack")
    def lock_hack(before, after, action, valid, info) -> float:
        return 0.5 * bool(valid)  # pays for pressing anything: never leads to success by itself
