"""Episode bookkeeping shared by both ALFWorld engines: plan following, sticky memory, ``info``.

The engines differ in how they compute the world; what they report about an episode must not, so
it lives here once (the differential test compares the two engines' ``info`` step by step).
"""

from __future__ import annotations

from rspo_kit.envs.alfworld.state import GoalInfo, WorldState, anchor, progress, visible_objects


class AlfworldEpisode:
    """Mixin: subclasses set ``self._world`` (a WorldState) and call the ``_begin`` / ``_observe`` hooks."""

    goal: GoalInfo
    _world: WorldState
    _done: bool = True

    def _begin(self, walkthrough: list[str] | None) -> None:
        """At reset: the expert's plan (None: plan lazily) and the episode's sticky memory."""
        self._plan, self._plan_pos = walkthrough, 0
        self._seen = set(visible_objects(self._world))
        self._visited = {self._world.at}

    def _observe(self, command: str, valid: bool) -> None:
        """After a step has updated ``self._world``: advance the plan and the sticky memory."""
        self._follow_plan(command, valid)
        self._seen |= visible_objects(self._world)
        self._visited.add(self._world.at)

    def _step_info(self, command: str, steps: int, timeout: bool) -> dict:
        return {**self.info, "steps": steps, "timeout": timeout, "command": command}

    def _next_planned(self, replan) -> str | None:
        """The next action of the plan; ``replan()`` gives a fresh plan from here when it is used up or left."""
        if self._done:
            return None
        if self._plan is None or self._plan_pos >= len(self._plan):
            self._plan, self._plan_pos = list(replan() or []), 0
        return self._plan[self._plan_pos] if self._plan else None

    @property
    def done(self) -> bool:
        return self._done

    @property
    def info(self) -> dict:
        """Progress and anchor of the current state (also right after reset)."""
        return {
            "progress": progress(self._world, self.goal, self._seen, self._visited),
            "anchor": anchor(self._world),
        }

    def _follow_plan(self, command: str, valid: bool) -> None:
        if not valid or self._plan is None:
            return  # an invalid action changes nothing, so the plan still holds
        if self._plan_pos < len(self._plan) and self._plan[self._plan_pos] == command:
            self._plan_pos += 1
        else:
            self._plan = None  # off the plan: replan lazily at the next expert_action()
