"""A user's env, as a user would write it outside rspo_kit: escape a cellar by finding the key.

The rooms lie in a row; one holds the key, another the locked door out. ``info["progress"]`` holds
plain numbers (``key``: the key is held, ``door``: the door is unlocked), which is all the generic
``progress`` process reward reads. The module registers the env as ``cellar`` and one process reward
of its own, ``wander``, that pays for every step through a doorway between rooms: the kind of term a
practitioner adds and an agent can collect forever without escaping. Nothing here is built in;
notebooks load it with ``ENV_MODULE`` (this file's path, or ``cellar_env`` with ``tests/`` on the path).
"""

from __future__ import annotations

from rspo_kit.envs import Observation, StepResult, Task, normalize_command, register_env
from rspo_kit.rewards.process import register_process_reward

ROOMS = ("wine vault", "coal store", "pantry", "boiler room", "old kitchen", "stairwell")
# (rooms in the row, the key's room, the door's room) per task; the door never shares the key's room
LAYOUTS = {
    "train": [(3, 0, 2), (3, 2, 0), (4, 1, 3), (4, 3, 0), (3, 1, 2), (4, 0, 3), (5, 4, 1), (5, 0, 4)],
    "eval": [(4, 2, 0), (5, 1, 4), (3, 0, 1), (5, 3, 0)],
    "eval_unseen": [(6, 5, 0), (6, 0, 5), (6, 2, 4)],
}


class Cellar:
    """The agent starts in the middle room; ``go east``/``go west`` walk the row."""

    def __init__(self, max_steps: int = 20):
        self.max_steps = max_steps

    def reset(self, task: Task) -> Observation:
        self.rooms = ROOMS[: task.meta["rooms"]]
        self.key_room, self.door_room = task.meta["key"], task.meta["door"]
        self.at, self.key, self.door, self.steps = len(self.rooms) // 2, 0, 0, 0
        self.info = {"progress": self._progress(), "anchor": self._anchor()}
        return self._observation(f"You wake up in the {self.rooms[self.at]}. It is cold and dark.")

    def step(self, action: str) -> StepResult:
        self.steps += 1
        command = normalize_command(action)
        valid = command in self.admissible_actions()
        won = False
        if not valid:
            text = "You cannot do that here."
        elif command.startswith("go "):
            self.at += 1 if command == "go east" else -1
            text = f"You walk into the {self.rooms[self.at]}."
        elif command == "take key":
            self.key, text = 1, "You pick up a heavy iron key."
        elif command == "unlock door":
            self.door, text = 1, "The lock turns with a groan."
        elif command == "open door":
            won, text = True, "You push the door open and climb out into the daylight."
        elif command == "rattle door":
            text = "The door is locked. Somewhere there must be a key."
        else:
            text = "You look around."
        done = won or self.steps >= self.max_steps
        self.info = {"progress": self._progress(), "anchor": self._anchor()}
        return StepResult(self._observation(text), done, won, float(won), valid, dict(self.info))

    def admissible_actions(self) -> list[str]:
        actions = ["look"]
        actions += ["go west"] if self.at > 0 else []
        actions += ["go east"] if self.at < len(self.rooms) - 1 else []
        if self.at == self.key_room and not self.key:
            actions.append("take key")
        if self.at == self.door_room:
            actions.append("open door" if self.door else "unlock door" if self.key else "rattle door")
        return actions

    def expert_action(self) -> str:
        goal = self.door_room if self.key else self.key_room
        if self.at != goal:
            return "go east" if goal > self.at else "go west"
        return "open door" if self.door else "unlock door" if self.key else "take key"

    def close(self) -> None:
        pass

    def _progress(self) -> dict[str, float]:
        return {"key": float(self.key), "door": float(self.door)}

    def _anchor(self) -> str:
        return f"{self.at}|{self.key}|{self.door}"

    def _observation(self, text: str) -> Observation:
        room = self.rooms[self.at]
        sights = []
        if self.at == self.key_room and not self.key:
            sights.append("A rusty key hangs on a nail.")
        if self.at == self.door_room:
            sights.append("A heavy door leads outside" + (", unlocked." if self.door else "; it is locked."))
        exits = ", ".join(a.removeprefix("go ") for a in self.admissible_actions() if a.startswith("go "))
        text = f"{text} This is the {room}. {' '.join(sights)} Exits: {exits}.".replace("  ", " ")
        return Observation(text, tuple(self.admissible_actions()), "Find the key and escape the cellar.")


def cellar_tasks(split: str) -> list[Task]:
    return [
        Task(
            "cellar",
            f"cellar/{split}/{i}",
            split,
            f"{rooms}-rooms",
            {"rooms": rooms, "key": key, "door": door},
        )
        for i, (rooms, key, door) in enumerate(LAYOUTS.get(split, []))
    ]


register_env("cellar", make=Cellar, list_tasks=cellar_tasks, overwrite=True)


@register_process_reward("cellar", "wander")
def cellar_wander(before, after, action, valid, info) -> float:
    return 0.5 * (valid and normalize_command(action).startswith("go "))
