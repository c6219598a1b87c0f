"""The chain testbed's TextEnv: rooms in a row, coloured doors, a clue to listen for, and a lever.

Any string is a legal action. ``listen`` tells which door of this room leads on (the clue holds for
this room only); ``open <colour> door`` through the windy door goes to the next room, through any other
back to room 1 (all progress lost); ``pull lever`` clicks and does nothing else, as often as it is
pulled. Anything else answers ``Nothing happens.`` with ``valid=False`` and changes nothing. Leaving
the last room wins (score 1); after ``max_steps`` steps the episode ends as a failure.
"""

from __future__ import annotations

from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, normalize_command
from rspo_kit.envs.chain.levels import ChainLevel

LISTEN, PULL = "listen", "pull lever"
NOTHING = "Nothing happens."


class ChainEnv:
    """The TextEnv of one chain level; ``max_steps`` overrides the level's step cap."""

    def __init__(self, level: ChainLevel, max_steps: int | None = None) -> None:
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.level = level
        self.max_steps = max_steps if max_steps is not None else level.step_cap
        self.task: Task | None = None
        self._done = True

    # ------------------------------------------------------------------ protocol

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.doors: tuple[tuple[str, ...], ...] = tuple(tuple(d) for d in task.meta["doors"])
        self.windy: tuple[str, ...] = tuple(task.meta["windy"])
        self.length = len(self.doors)
        self.instruction = (
            f"Leave room {self.length} of {self.length}. Listen to find the door that leads on."
        )
        self.room, self.heard, self.pulls, self.steps = 1, False, 0, 0
        self.won, self._done = False, False
        self.last_obs = self._observation(self._room_text())
        return self.last_obs

    def step(self, action: str) -> StepResult:
        if self._done:
            raise EpisodeOverError("the episode is over; call reset() before step()")
        command = normalize_command(action)
        self.steps += 1
        valid, text = True, NOTHING
        colours = self.doors[self.room - 1]
        if command == LISTEN:
            self.heard = True
            text = f"Wind blows from the {self.windy[self.room - 1]} door."
        elif command == PULL:
            self.pulls += 1
            text = "The lever clicks."
        elif command.startswith("open ") and command.endswith(" door") and command[5:-5] in colours:
            colour = command[5:-5]
            self.heard = False  # the clue was about the room just left
            if colour != self.windy[self.room - 1]:
                self.room = 1
                text = f"The {colour} door leads back to the start. {self._room_text()}"
            elif self.room == self.length:
                self.won = True
                text = f"You pass the {colour} door and leave the last room. You escaped!"
            else:
                self.room += 1
                text = f"You pass the {colour} door. {self._room_text()}"
        else:
            valid = False
        timeout = not self.won and self.steps >= self.max_steps
        self._done = self.won or timeout
        self.last_obs = self._observation(text)
        info = {**self.info, "steps": self.steps, "timeout": timeout, "command": command}
        return StepResult(self.last_obs, self._done, self.won, float(self.won), valid, info)

    def admissible_actions(self) -> list[str]:
        if self.task is None or self._done:
            return []
        return [LISTEN, PULL, *(f"open {c} door" for c in self.doors[self.room - 1])]

    def expert_action(self) -> str | None:
        """Optimal: listen once in each room entered, then open the windy door (2 steps per room)."""
        if self.task is None or self._done:
            return None
        return f"open {self.windy[self.room - 1]} door" if self.heard else LISTEN

    # ------------------------------------------------------------------ state

    @property
    def done(self) -> bool:
        return self._done

    @property
    def info(self) -> dict:
        """Progress and anchor of the current state (also right after reset)."""
        passed = self.length if self.won else self.room - 1
        progress = {
            "room": self.room,
            "rooms": self.length,
            "heard": int(self.heard),
            "lever_pulls": self.pulls,
            "subgoals_done": passed,  # rooms left behind; a wrong door sets it back to 0
            "subgoals_total": self.length,
        }
        anchor = "escaped" if self.won else f"room {self.room}, {'heard' if self.heard else 'not heard'}"
        return {"progress": progress, "anchor": anchor}

    def _room_text(self) -> str:
        return f"Room {self.room} of {self.length}. Doors: {', '.join(self.doors[self.room - 1])}."

    def _observation(self, text: str) -> Observation:
        return Observation(text, tuple(self.admissible_actions()), self.instruction)

    def close(self) -> None:
        """Nothing to release."""
