"""The replay buffer of the explorer's trajectories (RSPO step 4), FIFO per task, and the mixing of
replayed trajectories into the actor's groups (step 5).

Only outcome-relabelled trajectories enter: the buffer stores trajectories, never process rewards,
and the actor scores whatever it draws with the outcome reward alone. ``filter`` decides which of
the explorer's trajectories are worth keeping:

- ``success``: only won episodes (default; the tabular simulation's best),
- ``all``: every trajectory,
- ``outcome_novel``: only outcomes the actor's own group for that task did not reach this iteration,
- ``outcome_above_mean``: only outcomes above the mean of the actor's own group for that task this
  iteration: with success as the outcome the explorer's wins on tasks the actor did not always win;
  with partial credit (WebShop's score) its better-than-the-actor episodes, where ``success`` would
  admit almost nothing. A task the actor did not roll out has nothing to beat: everything enters.

Capacity is global; when it is exceeded the oldest trajectory of the fullest task goes first, so one
easy task cannot crowd out the others, and within a task the order is FIFO.
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, get_args

ReplayFilter = Literal["success", "all", "outcome_novel", "outcome_above_mean"]
FILTERS: tuple[str, ...] = get_args(ReplayFilter)


class ReplayBuffer:
    def __init__(self, capacity: int, filter: ReplayFilter = "success"):
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        if filter not in FILTERS:
            raise ValueError(f"replay filter must be one of {FILTERS}, got {filter!r}")
        self.capacity, self.filter = capacity, filter
        self._tasks: OrderedDict[str, deque] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(q) for q in self._tasks.values())

    def tasks(self) -> list[str]:
        return [t for t, q in self._tasks.items() if q]

    def items(self, task_id: str | None = None) -> list[Any]:
        """Stored trajectories (of one task, or all), oldest first."""
        if task_id is not None:
            return list(self._tasks.get(task_id, ()))
        return [t for q in self._tasks.values() for t in q]

    def keep(
        self,
        trajs: Iterable[Any],
        outcome: Callable[[Any], float],
        actor_outcomes: Mapping[str, Collection[float]] | None = None,
    ) -> list[Any]:
        """The trajectories the filter admits (crashed episodes never enter)."""
        out = []
        for t in trajs:
            if t.crashed or not t.steps:
                continue
            r = outcome(t)
            if self.filter == "success" and not t.won:
                continue
            reached = (actor_outcomes or {}).get(t.task_id, ())
            if self.filter == "outcome_novel" and r in reached:
                continue
            if self.filter == "outcome_above_mean" and reached and r <= sum(reached) / len(reached):
                continue
            out.append(t)
        return out

    def add(
        self,
        trajs: Iterable[Any],
        outcome: Callable[[Any], float],
        actor_outcomes: Mapping[str, Collection[float]] | None = None,
    ) -> int:
        """Admit trajectories through the filter; evict beyond capacity. Returns how many entered."""
        admitted = self.keep(trajs, outcome, actor_outcomes)
        for t in admitted:
            self._tasks.setdefault(t.task_id, deque()).append(t)
        while len(self) > self.capacity:
            fullest = max(self._tasks, key=lambda k: len(self._tasks[k]))  # first-inserted on ties
            self._tasks[fullest].popleft()
        return len(admitted)

    def sample(self, task_id: str, m: int, rng: random.Random) -> list[Any]:
        """Up to ``m`` distinct trajectories of a task, drawn uniformly (all of them if fewer)."""
        pool = list(self._tasks.get(task_id, ()))
        if m <= 0 or not pool:
            return []
        return pool if len(pool) <= m else rng.sample(pool, m)

    @classmethod
    def of(cls, capacity: int, filter: ReplayFilter, items: Iterable[Any]) -> ReplayBuffer:
        """A buffer holding ``items`` (oldest first) as stored, without filtering (checkpoint restore)."""
        buf = cls(capacity, filter)
        for t in items:
            buf._tasks.setdefault(t.task_id, deque()).append(t)
        return buf


def group_outcomes(trajs: Iterable[Any], outcome: Callable[[Any], float]) -> dict[str, list[float]]:
    """Outcome rewards per task, in order."""
    groups: dict[str, list[float]] = {}
    for t in trajs:
        groups.setdefault(t.task_id, []).append(outcome(t))
    return groups


def admit(
    buffer: ReplayBuffer, explorer: Iterable[Any], actor: Iterable[Any], outcome: Callable[[Any], float]
) -> int:
    """D_B into the buffer through its filter, judged by ``outcome`` alone; the filters that compare
    with the actor (``outcome_novel``, ``outcome_above_mean``) see the outcomes of the actor's own
    group on each task this iteration. Returns how many trajectories entered."""
    return buffer.add(explorer, outcome, group_outcomes(actor, outcome))


def mixed_groups(
    actor: Sequence[Any], buffer: ReplayBuffer, ratio: float, group_size: int, rng: random.Random
) -> tuple[list[Any], list[bool]]:
    """Each task's on-policy group plus M = round(ratio * G) replayed trajectories of that task.

    Returns the trajectories (task-major, on-policy first) and a per-trajectory off-policy flag.
    Replayed trajectories join their task's group: the group id of the actor's trajectories.
    """
    m = round(ratio * group_size)
    out, offpolicy = [], []
    by_task: OrderedDict[str, list[Any]] = OrderedDict()
    for t in actor:
        by_task.setdefault(t.task_id, []).append(t)
    for task_id, group in by_task.items():
        out += group
        offpolicy += [False] * len(group)
        replayed = buffer.sample(task_id, m, rng)
        out += [_as_member(r, group[0].group_id) for r in replayed]
        offpolicy += [True] * len(replayed)
    return out, offpolicy


def _as_member(traj: Any, group_id: str) -> Any:
    """A shallow copy of a replayed trajectory that carries the group id of the group it joins."""
    import copy

    member = copy.copy(traj)
    member.group_id = group_id
    member.source = "replay"
    return member
