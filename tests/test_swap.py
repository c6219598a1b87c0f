"""The steps of the swap (deriving the explorer, admitting to the replay buffer, mixing groups,
relabelling with the outcome) and its metrics, on hand-made trajectories."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace as NS

import pytest

from rspo_kit.swap import (
    ACTOR_SIGNAL,
    EXPLORER_SIGNAL,
    ReplayBuffer,
    admit,
    derive_explorer,
    mixed_groups,
    relabel_outcome,
    reward_swap,
    swap_metrics,
    syncs_at,
)


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


# ------------------------------------------------------------------ the named steps of the swap
def test_admitting_judges_the_explorer_against_the_actors_own_outcomes():
    actor = [traj("a", True, 0, "actor"), traj("a", False, 1, "actor"), traj("b", False, 2, "actor")]
    explorer = [traj("a", True, 10), traj("a", False, 11), traj("b", True, 12)]
    buf = ReplayBuffer(10, "outcome_novel")
    assert admit(buf, explorer, actor, outcome) == 1  # a reached both outcomes; b's win is new
    assert [t.i for t in buf.items()] == [12]


@pytest.mark.parametrize(
    "ratio, group, m", [(0.25, 8, 2), (0.25, 4, 1), (0.5, 2, 1), (0.6, 5, 3), (0.0, 8, 0)]
)
def test_mixing_draws_round_ratio_times_g_for_tasks_with_replay_and_none_for_others(ratio, group, m):
    buf = ReplayBuffer(100, "all")
    buf.add([traj("a", True, i) for i in range(10)], outcome)  # more than any M: draws are capped by M
    actor = [traj(task, False, 100 + i, "actor") for task in ("a", "b") for i in range(group)]
    mixed, off = mixed_groups(actor, buf, ratio, group, random.Random(1))
    replayed = [t for t, o in zip(mixed, off, strict=True) if o]
    assert len(replayed) == m == round(ratio * group) and all(t.task_id == "a" for t in replayed)
    assert len({t.i for t in replayed}) == m  # distinct trajectories
    assert [t.task_id for t in mixed] == ["a"] * (group + m) + ["b"] * group  # each group, then its replay


def _progress_traj(task: str, won: bool, n_steps: int, i: int, source: str = "explorer"):
    """A trajectory whose every step completes a subgoal: a process return of n_steps / 3 at least."""
    steps = [
        NS(
            progress_before={"subgoals_done": k, "subgoals_total": 3},
            progress_after={"subgoals_done": k + 1, "subgoals_total": 3},
            action="go to desk 1",
            valid=True,
            info={},
        )
        for k in range(n_steps)
    ]
    return NS(
        task_id=task,
        group_id=f"{task}@1",
        won=won,
        score=float(won),
        steps=steps,
        crashed=False,
        source=source,
        i=i,
    )


def test_the_swap_scores_the_mixed_batch_by_outcome_and_never_by_process():
    from rspo_kit.rewards.signals import RewardModel

    rewards = RewardModel.build("alfworld")  # subgoals: every step of these earns a process reward
    actor = [_progress_traj("a", False, 3, 0, "actor"), _progress_traj("a", False, 2, 1, "actor")]
    explorer = [_progress_traj("a", True, 2, 10), _progress_traj("a", False, 3, 11)]
    buffer = ReplayBuffer(10, "success")
    swap = reward_swap(actor, explorer, buffer, rewards, replay_ratio=0.5, group_size=2, rng=random.Random(0))
    assert [t.i for t in swap.trajs] == [0, 1, 10] and swap.offpolicy == [False, False, True]
    for t, r in zip(swap.trajs, swap.rewards, strict=True):
        assert r == [0.0] * (len(t.steps) - 1) + [rewards.outcome_return(t)]  # R_o on the last step only
        assert r != rewards.step_rewards(t, "process") and sum(rewards.process_steps(t)) > 0
    assert swap.rewards == relabel_outcome(swap.trajs, rewards)
    assert swap.metrics["swap/rescued_groups"] == 1.0 and swap.metrics["swap/admitted"] == 1.0
    assert (EXPLORER_SIGNAL, ACTOR_SIGNAL) == ("process", "outcome")


class _SignalNames:
    """Rewards that say which signal asked for them."""

    def batch_rewards(self, trajs, signal):
        return [[f"{signal}:{t.i}"] for t in trajs]


def test_deriving_the_explorer_syncs_every_sync_every_and_then_trains_on_its_own_rollout():
    import torch

    weight = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.Adam([weight], lr=0.1)
    synced, seen = [], []
    pair = NS(sync_explorer=lambda: synced.append(True))

    def x_update(trajs, rewards, u):
        seen.append((u, [t.i for t in trajs], rewards, len(optimizer.state)))
        weight.grad = torch.ones(2)
        optimizer.step()  # Adam moments: what a sync must clear
        return {"loss/policy": float(u), f"only/{u}": 1.0}

    actor, own = [traj("a", False, 1, "actor")], [traj("a", True, 2)]
    batches = {"actor_batch": actor, "own_batch": own, "rewards": _SignalNames(), "x_update": x_update}
    for k in range(1, 6):
        seen.clear()
        m = derive_explorer(pair, optimizer, iteration=k, sync_every=2, updates=2, **batches)
        sync = k in (1, 3, 5)
        assert len(synced) == (k + 1) // 2 and syncs_at(k, 2) == sync
        batch = [1] if sync else [2]  # D_A right after a sync (B = A), else B's own D_B
        signal = [[f"process:{batch[0]}"]]  # B trains on the process reward
        moments = 0 if sync else 1  # a sync starts B's optimizer afresh
        assert seen == [(0, batch, signal, moments), (1, batch, signal, 1)]
        assert m == {"loss/policy": 1.0, "only/0": 1.0, "only/1": 1.0}  # the later update's value wins
    # the control (no dense training): B is A, synced, and takes no update
    seen.clear()
    assert derive_explorer(pair, optimizer, iteration=7, sync_every=1, updates=0, **batches) == {}
    assert seen == [] and len(optimizer.state) == 0


def test_a_persistent_explorer_is_synced_once_and_then_trains_on_its_own_rollouts():
    """``sync_every=0``: B <- A at the first iteration only; every later update runs on D_B."""
    import torch

    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    synced, seen = [], []
    pair = NS(sync_explorer=lambda: synced.append(True))
    actor, own = [traj("a", False, 1, "actor")], [traj("a", True, 2)]
    for k in range(1, 6):
        derive_explorer(
            pair,
            optimizer,
            iteration=k,
            sync_every=0,
            updates=2,
            actor_batch=actor,
            own_batch=own,
            rewards=_SignalNames(),
            x_update=lambda b, r, u: seen.append(b[0].i) or {},
        )
    assert len(synced) == 1 and [syncs_at(k, 0) for k in range(1, 4)] == [True, False, False]
    assert seen == [1, 1] + [2, 2] * 4  # two updates per iteration: on D_A once, then on B's own D_B


def test_a_replayed_trajectory_adds_no_optimizer_step_of_its_own(monkeypatch):
    """The actor's mixed batch is split into minibatches of equal size (within one step).

    4 tasks x 8 actor trajectories of 8 steps are 256 steps, 4 minibatches of 64; one replayed success
    of 7 steps used to make a fifth minibatch of those 7 steps alone: one whole extra Adam step on the
    gradient of 7 steps, or on Adam's momentum alone where their advantages are 0. On the chain testbed
    (lr 1e-3) that step took the actor's share of ``listen`` on its batch's states from 66% to 80%.
    """
    import torch

    from rspo_kit.algos.offpolicy import OffPolicy
    from rspo_kit.train import update as U
    from rspo_kit.train.config import AlgoConfig

    def episode(task: str, n_steps: int, i: int, source: str, won: bool = False):
        t = _progress_traj(task, won, n_steps, i, source)
        t.group_id = f"{task}@2"
        for k, s in enumerate(t.steps):
            s.anchor = f"{task}/{k}"
        return t

    actor = [episode(f"t{j}", 8, 8 * j + g, "actor") for j in range(4) for g in range(8)]
    buf = ReplayBuffer(8)
    assert buf.add([episode("t2", 7, 99, "explorer", won=True)], outcome) == 1
    trajs, offpolicy = mixed_groups(actor, buf, 0.25, 8, random.Random(0))
    assert sum(offpolicy) == 1  # the replayed success joins t2's group
    batch = U.UpdateBatch(trajs, [[0.0] * len(t.steps) for t in trajs], offpolicy)
    n = sum(len(t.steps) for t in trajs)
    assert n == 263

    def prepare(learner, flat, cfg, offpolicy, temperature, clock=None):
        ones, zeros = [torch.ones(1) for _ in flat.steps], [torch.zeros(1) for _ in flat.steps]
        units = U.Units(zeros, ones, [torch.zeros(1, dtype=torch.bool)] * n, ones, ones)
        return None, U.Advantages(torch.zeros(n)), units

    sizes = []
    monkeypatch.setattr(U, "_prepare", prepare)
    monkeypatch.setattr(U, "_minibatch_loss", lambda learner, flat, adv, sel, *a: sizes.append(sel) or {})
    U.update(NS(), batch, AlgoConfig(name="grpo", minibatch_steps=64), OffPolicy())
    assert sorted(i for sel in sizes for i in sel) == list(range(n))  # every step once
    assert [len(sel) for sel in sizes] == [66, 66, 66, 65]


def test_a_minibatch_without_gradient_leaves_the_policy_where_it_is(monkeypatch):
    """An actor minibatch whose advantages are all 0 (groups that all failed) has a zero gradient and
    takes no optimizer step: Adam's momentum from the minibatches before would still move the policy
    (after one replayed success, a zero-gradient step took the chain actor's ``listen`` share from 66%
    to 80%, and all-failure iterations after it kept moving the policy with no signal at all)."""
    import torch

    from rspo_kit.train import update as U
    from rspo_kit.train.config import AlgoConfig

    weight = torch.nn.Parameter(torch.zeros(3))
    learner = NS(params=[weight], optimizer=torch.optim.AdamW([weight], lr=0.1, weight_decay=0.0))
    learner.value_head = None
    grads = [torch.tensor([1.0, -1.0, 0.5]), torch.zeros(3)]  # one step with signal, then none

    def backward(learner, *args):
        weight.grad = grads.pop(0)
        return {}, [], None

    monkeypatch.setattr(U, "_backward", backward)
    cfg = AlgoConfig(name="grpo")
    assert U._minibatch_loss(learner, *[None] * 4, cfg, *[None] * 3)["loss/grad_norm"] > 0
    moved = weight.detach().clone()
    assert moved.abs().sum() > 0 and len(learner.optimizer.state) == 1
    assert U._minibatch_loss(learner, *[None] * 4, cfg, *[None] * 3)["loss/grad_norm"] == 0
    assert torch.equal(weight.detach(), moved)  # before: Adam's momentum moved it another ~0.1 per unit
