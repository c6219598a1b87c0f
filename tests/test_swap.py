"""The replay buffer, group mixing and swap metrics, on hand-made trajectories."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace as NS

import pytest

from rspo_kit.swap import ReplayBuffer, mixed_groups, swap_metrics


def traj(task: str, won: bool, i: int = 0, source: str = "explorer", crashed: bool = False):
    return NS(
        task_id=task,
        group_id=f"{task}@1",
        won=won,
        score=float(won),
        steps=[NS(id=i)],
        crashed=crashed,
        source=source,
        i=i,
    )


def outcome(t) -> float:
    return float(t.won)


@pytest.mark.parametrize(
    "filter, expected",
    [
        ("success", [1, 3]),
        ("all", [0, 1, 2, 3]),
        ("outcome_novel", [1, 3]),
        ("outcome_above_mean", [1]),  # b's actor group averaged 1.0: a win (1) does not beat it
    ],  # the actor's group on a only failed
)
def test_filters(filter, expected):
    buf = ReplayBuffer(10, filter)
    trajs = [traj("a", False, 0), traj("a", True, 1), traj("b", False, 2), traj("b", True, 3)]
    actor_outcomes = {"a": {0.0}, "b": {0.0, 2.0}}  # b's actor group had a failure (0) and something else
    assert [t.i for t in buf.keep(trajs, outcome, actor_outcomes)] == expected


def test_outcome_novel_drops_outcomes_the_actor_reached():
    buf = ReplayBuffer(10, "outcome_novel")
    assert buf.keep([traj("a", True)], outcome, {"a": {1.0, 0.0}}) == []


def test_outcome_above_mean_admits_what_beats_the_actors_group_on_partial_credit():
    buf = ReplayBuffer(10, "outcome_above_mean")
    scored = [NS(**{**vars(traj("a", False, i)), "score": s}) for i, s in enumerate([0.2, 0.5, 0.9])]
    scored.append(NS(**{**vars(traj("c", False, 3)), "score": 0.1}))  # no actor group on c: enters
    admitted = buf.keep(scored, lambda t: t.score, {"a": [0.0, 0.5, 1.0, 0.5]})  # mean 0.5
    assert [t.i for t in admitted] == [2, 3]
    # with success as the outcome, a win enters unless the actor's group won every time
    assert len(buf.keep([traj("a", True)], outcome, {"a": [1.0, 0.0]})) == 1
    assert buf.keep([traj("a", True)], outcome, {"a": [1.0, 1.0]}) == []


def test_crashed_and_empty_trajectories_never_enter():
    buf = ReplayBuffer(10, "all")
    assert (
        buf.add([traj("a", True, crashed=True), NS(**{**vars(traj("a", True)), "steps": []})], outcome) == 0
    )


def test_capacity_evicts_the_oldest_of_the_fullest_task():
    buf = ReplayBuffer(4, "all")
    buf.add([traj("a", True, i) for i in range(3)] + [traj("b", True, 10)], outcome)
    buf.add([traj("b", True, 11)], outcome)  # 5 > 4: a holds most, its oldest (0) goes
    assert [t.i for t in buf.items("a")] == [1, 2] and [t.i for t in buf.items("b")] == [10, 11]
    assert len(buf) == 4


def test_mixed_groups_add_round_ratio_g_replayed_per_task():
    buf = ReplayBuffer(100, "all")
    buf.add([traj("a", True, i) for i in range(5)], outcome)
    actor = [traj("a", False, 100 + i, "actor") for i in range(8)] + [
        traj("b", False, 200 + i, "actor") for i in range(8)
    ]
    mixed, off = mixed_groups(actor, buf, 0.25, 8, random.Random(0))
    assert len(mixed) == 8 + 2 + 8 and sum(off) == 2  # b has nothing stored
    replayed = [t for t, o in zip(mixed, off, strict=True) if o]
    assert all(t.group_id == "a@1" and t.source == "replay" for t in replayed)
    assert all(t.source == "explorer" for t in buf.items())  # the stored copies are untouched
    again, _ = mixed_groups(actor, buf, 0.25, 8, random.Random(0))
    assert [t.i for t in again] == [t.i for t in mixed]  # seeded: reproducible
    alone, off = mixed_groups(actor, buf, 0.0, 8, random.Random(0))  # replay off: the actor's groups only
    assert [t.i for t in alone] == [t.i for t in actor] and not any(off)


def test_swap_metrics_count_rescued_groups():
    actor = [
        traj("a", False, 0, "actor"),
        traj("a", False, 1, "actor"),
        traj("b", True, 2, "actor"),
        traj("b", False, 3, "actor"),
    ]
    explorer = [traj("a", True, 4), traj("a", False, 5)]
    buf = ReplayBuffer(10, "success")
    admitted = buf.add(explorer, outcome)
    mixed, off = mixed_groups(actor, buf, 0.5, 2, random.Random(0))
    m = swap_metrics(actor, explorer, mixed, off, outcome, lambda t: 1.0 - t.won, admitted, len(buf))
    assert m["swap/rescued_groups"] == 1.0  # a: all failed on-policy, mixed with a replayed success
    assert m["swap/zero_var_groups_before"] == 0.5 and m["swap/zero_var_groups_after"] == 0.0
    assert m["swap/replay_success_rate"] == 1.0 and m["swap/explorer_success"] == 0.5
    assert m["swap/process_outcome_tau"] == -1.0  # this process reward ranks failures first
    assert m["swap/admitted"] == 1.0 and not math.isnan(m["swap/explorer_hacking_rate"])
