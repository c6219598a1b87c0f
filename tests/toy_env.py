"""A toy env for the batch runner's fault tests: "ok" three times wins. Each test file's subclass
misbehaves on actions of its own (crashing, hanging, raising) before the plain step."""

from __future__ import annotations

from rspo_kit.envs import Observation, StepResult, Task, register_env


class SayOkThreeTimes:
    commands: tuple[str, ...] = ("ok",)  # what the first observation lists

    def reset(self, task: Task) -> Observation:
        self.steps = 0
        return Observation("ready", self.commands, "say ok three times")

    def step(self, action: str) -> StepResult:
        self.steps += 1
        won = self.steps == 3
        return StepResult(
            Observation("ok", ("ok",), ""), won, won, float(won), True, {"progress": {}, "anchor": ""}
        )

    def admissible_actions(self) -> list[str]:
        return ["ok"]

    def expert_action(self) -> str:
        return "ok"


def register_toy(name: str, make) -> None:
    """Registers ``make`` as ``name`` (again, if a test module is imported twice) with four tasks a split."""
    register_env(
        name,
        make=make,
        list_tasks=lambda split: [Task(name, f"{name}/{i}", split) for i in range(4)],
        overwrite=True,
    )
