"""The paper's Algorithm 1 (``rspo_kit.swap.loop``): the loop's order, what reaches A, the buffer, the
draws, GePPO's shifted clip against a slow loop, J's α weighting and both budgets, on hand-made
trajectories and on real runs of the lock and the chain testbed."""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
import torch
from lock_env import register_lock
from trainer_runs import assert_actor_gradient_is_the_same_under, trained_keeping_last_update

from rspo_kit.algos import clipped_policy_loss, shifted_center
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap.buffer import LoopBuffer, ReplayEntry, draw
from rspo_kit.swap.loop import LoopBatch, LoopSettings, rspo_loop
from rspo_kit.train import Trainer, initial_policy, preset, train
from rspo_kit.train.resume import restore_newest
from rspo_kit.train.update import UpdateBatch, _share_weights, batch_advantages, flatten

register_lock()


# ------------------------------------------------------------------------------ hand-made runs
def _episode(task: str, tag: str, source: str, digits: list[int], won: bool):
    """A lock episode: one step per entry of ``digits`` (the digits entered after it)."""
    steps, before = [], 0
    for j, d in enumerate(digits):
        steps.append(
            NS(
                progress_before={"digits": before, "presses": j},
                progress_after={"digits": d, "presses": j + 1},
                action=f"press {d}",
                valid=True,
                info={},
                anchor=f"{task}/{d}",
            )
        )
        before = d
    return NS(
        task_id=task,
        group_id=f"{task}@{tag}",
        source=source,
        steps=steps,
        won=won,
        score=float(won),
        crashed=False,
    )


class FakeRun:
    """A LoopRun that plays scripted episodes and records every call, in order."""

    def __init__(self, group_size: int = 4):
        self.calls: list[tuple] = []
        self.group_size = group_size
        self.rng = random.Random(0)

    def sync_explorer(self):
        self.calls.append(("sync",))

    def rollout(self, role, n_tasks, step):
        trajs = []
        for task in range(n_tasks):
            for _g in range(self.group_size):
                won = self.rng.random() < (0.6 if role != "actor" else 0.2)
                digits = [1, 2] if won else [self.rng.choice([0, 1]), 0, 1]
                trajs.append(_episode(f"t{task}", f"{role}{step}", role, digits, won))
        self.calls.append(("rollout", role, step, trajs))
        return trajs

    def update(self, role, batch):
        self.calls.append(("update", role, batch))
        return {"loss/policy": 0.0}

    def advantages(self, trajs, rewards):
        batch = UpdateBatch(list(trajs), [list(r) for r in rewards])
        flat = batch_advantages(batch, preset("smoke", env="dial", algo="grpo").algo).step.tolist()
        out, i = [], 0
        for t in trajs:
            out.append(flat[i : i + len(t.steps)])
            i += len(t.steps)
        return out


SETTINGS = LoopSettings(steps=3, on_policy_tasks=3, replayed=4, collect_tasks=6)


def _loop(rewards: RewardModel, settings: LoopSettings = SETTINGS, buffer: LoopBuffer | None = None):
    run, buffer = FakeRun(), LoopBuffer() if buffer is None else buffer
    record = rspo_loop(run, settings, rewards, buffer, random.Random(1))
    return run, record, buffer


def test_one_loop_runs_algorithm_1_in_order_and_b_learns_only_from_its_own_dense_rollouts():
    run, _record, buffer = _loop(RewardModel.build("dial"))
    kinds = [(c[0], *c[1:2]) for c in run.calls]
    k = SETTINGS.steps
    expected = [("sync",)] + [("rollout", "explorer"), ("update", "explorer")] * k
    expected += [("rollout", "collection")] + [("rollout", "actor"), ("update", "actor")] * k
    assert kinds == expected  # B <- A first, k dense steps of B, the collection, k steps of A
    rollouts = [c for c in run.calls if c[0] == "rollout"]
    updates = [c for c in run.calls if c[0] == "update"]
    for rollout, update in zip(
        rollouts[:k], updates[:k], strict=True
    ):  # each B step on its own fresh rollout
        assert update[2].trajs is rollout[3] and not any(update[2].offpolicy)
    assert len({c[2] for c in rollouts}) == 2 * k + 1  # every rollout its own step (tasks, seed)
    assert len(buffer) == 0  # D <- ∅ at the loop's end


def test_the_actors_batches_are_d_on_then_d_off_scored_by_outcome_with_stored_collection_advantages():
    rewards = RewardModel.build("dial")
    run, record, _ = _loop(rewards)
    collected = {id(e.traj): e for e in record.collection}
    for batch, drawn in zip(record.actor, record.drawn, strict=True):
        n_on = SETTINGS.on_policy_tasks * run.group_size
        assert batch.offpolicy == [False] * n_on + [True] * SETTINGS.replayed
        assert all(t.source == "actor" for t in batch.trajs[:n_on])
        assert all(t.source == "replay" for t in batch.trajs[n_on:])
        assert batch.rewards == rewards.batch_rewards(batch.trajs, "outcome")
        assert batch.stored_advantages[:n_on] == [None] * n_on
        assert batch.stored_advantages[n_on:] == [e.advantages for e in drawn]
        assert all(id(e.traj) in collected for e in drawn)
    drawn = [id(e.traj) for d in record.drawn for e in d]
    assert len(drawn) == len(set(drawn))  # without replacement across A's k steps


def test_noise_in_place_of_every_dense_reward_changes_b_and_nothing_a_learns_from():
    """The swap's invariant: A's batches (trajectories, rewards, stored advantages) and its gradient are
    the same whether B's dense reward is the env's or pure noise."""
    aligned = RewardModel.build("dial", process="subgoal")
    noise = random.Random(7)
    noisy = RewardModel(aligned.env, aligned.outcome, lambda *args: noise.gauss(0, 1), aligned.mix_lambda)
    runs = [_loop(aligned)[1], _loop(noisy)[1]]
    for a, b in zip(runs[0].actor, runs[1].actor, strict=True):
        assert [id(t) for t in a.trajs] != [] and a.rewards == b.rewards
        assert a.stored_advantages == b.stored_advantages and a.offpolicy == b.offpolicy
    assert runs[0].explorer[0].rewards != runs[1].explorer[0].rewards  # B did see the dense reward


def test_the_actors_gradient_on_a_real_loop_ignores_a_process_reward_made_of_noise(tmp_path):
    cfg = preset("smoke", env="dial", algo="gigpo", swap=True, reward__misalign_eps=1.0)
    cfg.train.iterations, cfg.train.run_dir, cfg.train.threads = 1, str(tmp_path / "run"), 1
    trainer, last = trained_keeping_last_update(cfg)
    batch = last["batch"]
    assert any(batch.offpolicy) and any(a is not None for a in batch.stored_advantages)
    noise = random.Random(3)
    noisy = RewardModel(trainer.rewards.env, trainer.rewards.outcome, lambda *a: noise.random(), 0.5)
    assert_actor_gradient_is_the_same_under(trainer, cfg, batch, noisy)


def test_rspo_o_trains_b_on_the_outcome_and_dense_noise_moves_only_bs_reward():
    rewards = RewardModel.build("dial", process="hack")
    _, outcome_b, _ = _loop(rewards, LoopSettings(**{**SETTINGS.__dict__, "explorer_reward": "outcome"}))
    for batch in outcome_b.explorer:
        assert batch.rewards == rewards.batch_rewards(batch.trajs, "outcome")
    _, clean, _ = _loop(rewards)
    _, noisy, _ = _loop(rewards, LoopSettings(**{**SETTINGS.__dict__, "dense_noise": 0.3}))
    for a, b in zip(clean.explorer, noisy.explorer, strict=True):
        diff = [x[-1] - y[-1] for x, y in zip(a.rewards, b.rewards, strict=True)]
        assert all(x[:-1] == y[:-1] for x, y in zip(a.rewards, b.rewards, strict=True))  # on the return only
        assert 0.1 < (sum(d * d for d in diff) / len(diff)) ** 0.5 < 0.6
    assert [b.rewards for b in clean.actor] == [b.rewards for b in noisy.actor]


def test_rspo_h_replays_the_actors_own_previous_loop_and_has_no_explorer():
    settings = LoopSettings(**{**SETTINGS.__dict__, "replay_source": "actor_history"})
    buffer = LoopBuffer()
    run, first, _ = _loop(RewardModel.build("dial"), settings, buffer)
    assert not first.explorer and not first.collection and all(not d for d in first.drawn)
    assert not any(c[0] == "sync" or (len(c) > 1 and c[1] != "actor") for c in run.calls)
    own = [t for b in first.actor for t in b.trajs]
    assert [e.traj for e in buffer.entries] == own  # D <- A's rollouts of this loop
    run2 = FakeRun()
    second = rspo_loop(run2, settings, RewardModel.build("dial"), buffer, random.Random(2))
    assert all(len(d) == settings.replayed for d in second.drawn)
    assert all(id(e.traj) in {id(t) for t in own} for d in second.drawn for e in d)


def test_a_fifo_buffer_is_kept_across_loops_up_to_its_capacity():
    settings = LoopSettings(**{**SETTINGS.__dict__, "buffer": "fifo"})
    buffer = LoopBuffer(capacity=30)
    _loop(RewardModel.build("dial"), settings, buffer)
    assert len(buffer) == 24  # 6 tasks x 4
    _loop(RewardModel.build("dial"), settings, buffer)
    assert len(buffer) == 30


# ---------------------------------------------------------------------------------- sampling
def _entry(outcome: float, group: str, adv: float = 0.0):
    return ReplayEntry(NS(won=outcome >= 1, steps=[1], crashed=False), outcome, [adv], group)


BUFFER = [
    _entry(0.0, "a", -0.6),  # 0
    _entry(1.0, "a", 1.2),  # 1: a success where B mostly failed
    _entry(0.0, "a", -0.6),  # 2
    _entry(1.0, "b", 0.0),  # 3: successes of an all-success group (A_off = 0)
    _entry(1.0, "b", 0.0),  # 4
    _entry(0.5, "c", 0.5),  # 5
    _entry(0.0, "c", -0.5),  # 6
]


def test_reward_sampling_draws_the_highest_outcomes_and_breaks_ties_by_stored_advantage():
    picked = draw(BUFFER, 3, "reward", random.Random(0))
    assert picked[0] == 1 and sorted(picked[1:]) == [3, 4]
    assert draw(BUFFER, 4, "reward", random.Random(0))[3] == 5
    ties = {tuple(draw(BUFFER, 3, "reward", random.Random(s), tie_order="random")) for s in range(40)}
    assert any(t[0] != 1 for t in ties)  # a random tie order does not always put the rescuing success first


def test_variance_sampling_prefers_the_groups_whose_outcomes_differ():
    # variances: a 0.222, b 0, c 0.0625
    assert sorted(draw(BUFFER, 3, "variance", random.Random(0))) == [0, 1, 2]
    picked = draw(BUFFER, 5, "variance", random.Random(0), unit="group")  # a whole, best first, then c
    assert picked[0] == 1 and sorted(picked[1:3]) == [0, 2] and picked[3:] == [5, 6]


def test_random_sampling_is_uniform_and_group_draws_take_whole_groups():
    counts = [0] * len(BUFFER)
    for s in range(700):
        for i in draw(BUFFER, 2, "random", random.Random(s)):
            counts[i] += 1
    assert all(abs(c / 700 - 2 / 7) < 0.08 for c in counts)
    assert draw(BUFFER, 2, "reward", random.Random(0), unit="group") == [3, 4]  # group b's mean is highest
    assert draw(BUFFER, 9, "reward", random.Random(0)) == draw(BUFFER, 7, "reward", random.Random(0))
    with pytest.raises(ValueError, match="sampling must be one of"):
        draw(BUFFER, 1, "best", random.Random(0))


# --------------------------------------------------------------------------------- the objective
def _slow_shifted(logp, logp_b, logp_old, adv, low, high):
    out = []
    for lp, lb, lo, a in zip(logp.tolist(), logp_b.tolist(), logp_old.tolist(), adv.tolist(), strict=True):
        r, c = math.exp(lp - lb), math.exp(lo - lb)
        clipped = min(max(r, c - low), c + high)
        out.append(-min(r * a, clipped * a))
    return sum(out) / len(out)


@pytest.mark.parametrize("seed", range(5))
def test_the_shifted_clip_matches_a_slow_loop(seed):
    g = torch.Generator().manual_seed(seed)
    logp_b = torch.log(torch.rand(20, generator=g) * 0.9 + 0.05)
    logp_old = torch.log(torch.rand(20, generator=g) * 0.9 + 0.05)
    logp = logp_old + 0.4 * torch.randn(20, generator=g)
    adv = torch.randn(20, generator=g)
    out = clipped_policy_loss(
        logp,
        logp_b,
        adv,
        torch.ones(20, dtype=torch.bool),
        0.2,
        0.3,
        clip_center=shifted_center(logp_old, logp_b),
    )
    assert float(out.loss) == pytest.approx(_slow_shifted(logp, logp_b, logp_old, adv, 0.2, 0.3), rel=1e-5)


def test_with_pi_old_equal_to_pi_b_the_shifted_clip_is_ppos_clip():
    g = torch.Generator().manual_seed(0)
    logp_b = torch.log(torch.rand(12, generator=g) * 0.9 + 0.05)
    logp = (logp_b + 0.5 * torch.randn(12, generator=g)).requires_grad_()
    adv, mask = torch.randn(12, generator=g), torch.ones(12, dtype=torch.bool)
    shifted = clipped_policy_loss(logp, logp_b, adv, mask, clip_center=shifted_center(logp_b, logp_b))
    ppo = clipped_policy_loss(logp, logp_b, adv, mask)
    assert torch.equal(shifted.loss, ppo.loss) and torch.equal(shifted.clipped, ppo.clipped)


def test_a_ratio_past_the_shifted_window_has_no_gradient_and_one_inside_has():
    # π_B = 0.1, π_old = 0.4: c = 4, window [3.8, 4.2]; π_θ = 0.5 is ratio 5, past it for A > 0
    logp_b, logp_old = torch.log(torch.tensor([0.1, 0.1])), torch.log(torch.tensor([0.4, 0.4]))
    logp = torch.log(torch.tensor([0.5, 0.41])).requires_grad_()
    adv = torch.tensor([1.0, 1.0])
    out = clipped_policy_loss(
        logp, logp_b, adv, torch.ones(2, dtype=torch.bool), clip_center=shifted_center(logp_old, logp_b)
    )
    (grad,) = torch.autograd.grad(out.loss, logp)
    assert grad[0] == 0 and grad[1] != 0
    assert out.clipped.tolist() == [True, False]
    # the ordinary window around 1 would have clipped both (ratios 5 and 4.1 against π_B)
    plain = clipped_policy_loss(logp, logp_b, adv, torch.ones(2, dtype=torch.bool))
    assert plain.clipped.tolist() == [True, True]


def test_j_is_one_minus_alpha_j_on_plus_alpha_j_off_each_a_token_mean():
    swap = preset("smoke", env="dial", swap=True).swap
    swap.offpolicy_share = 0.25
    flat = NS(offpolicy=torch.tensor([False, False, True]))
    on, off = _share_weights(flat, [3, 5, 2], swap.offpolicy)  # 8 on-policy units, 2 replayed, 10 in all
    # token mean of w·ℓ over 10 units = 0.75 · mean_on + 0.25 · mean_off
    assert on * 8 / 10 == pytest.approx(0.75) and off * 2 / 10 == pytest.approx(0.25)
    swap.offpolicy_weighting = "data_share"
    assert _share_weights(flat, [3, 5, 2], swap.offpolicy) == (1.0, 1.0)


def test_a_replayed_trajectory_learns_from_its_stored_advantage_not_from_the_drawn_subset():
    rewards = RewardModel.build("dial")
    wins = [_episode("t0", "c", "collection", [1, 2], True) for _ in range(2)]
    trajs = [*wins, _episode("t0", "c", "collection", [0, 0, 1], False)]
    batch = UpdateBatch(wins, rewards.batch_rewards(wins, "outcome"), [True, True], [[0.7, 0.7], [0.7, 0.7]])
    algo = preset("smoke", env="dial", algo="grpo").algo
    assert batch_advantages(batch, algo).step.tolist() == pytest.approx([0.7] * 4)
    recomputed = UpdateBatch(wins, batch.rewards, [True, True])  # two successes alone: no spread
    assert batch_advantages(recomputed, algo).step.tolist() == [0.0] * 4
    assert len(flatten(UpdateBatch(trajs, rewards.batch_rewards(trajs, "outcome"))).steps) == 7


# ---------------------------------------------------------------------------------- real runs
def _run(env: str, tmp_path: Path, swap="rspo", **overrides):
    cfg = preset("smoke", env=env, algo="grpo", swap=swap, **overrides)
    cfg.train.run_dir, cfg.train.threads = str(tmp_path / f"{env}_{swap}"), 1
    return cfg


def test_one_chain_loop_counts_k_updates_of_each_role_and_every_env_step(tmp_path):
    cfg = _run("chain-4x2", tmp_path, swap__loop_steps=3)
    cfg.train.iterations = 1
    steps = {"actor": 0, "explorer": 0, "collection": 0}
    starts = []

    class Watch:
        def on_rollout_end(self, event):
            steps[event.data["role"]] += sum(t.env_steps for t in event.data["trajectories"])
            if event.data["role"] == "explorer" and not starts:  # B's first rollout: B = A still
                starts.append(
                    [
                        torch.equal(a, b)
                        for a, b in zip(
                            *(trainer.pair.parameters(r) for r in ("actor", "explorer")), strict=True
                        )
                    ]
                )

    policy, report = initial_policy(cfg, progress_bar=False)
    trainer = Trainer(cfg, policy, [Watch()], start_report=report)
    # B starts the run elsewhere than A, so that only the loop's B <- A can make them equal
    with torch.no_grad():
        for p in trainer.pair.parameters("explorer"):
            p.add_(1.0)
    row = trainer.run().metrics.iloc[-1]
    assert starts and all(starts[0])
    assert row["budget/actor_updates"] == 3 and row["budget/explorer_updates"] == 3
    assert row["budget/env_steps_actor"] == steps["actor"] == row["rollout/env_steps"]
    assert row["budget/env_steps_explorer"] == steps["explorer"] + steps["collection"]
    assert row["budget/env_steps"] == sum(steps.values()) == row["rollout/cumulative_env_steps"]
    assert len(trainer.loop_buffer) == 0  # D <- ∅ after the loop
    for key in (
        "explorer/dense_before",
        "explorer/dense_after",
        "swap/collect_success",
        "swap/buffer_size",
        "swap/drawn_outcome_mean",
        "offpolicy/clip_frac",
        "rollout/repeated_states",
    ):
        assert key in row and math.isfinite(row[key]), key


def test_train_updates_stops_at_the_loop_that_reaches_that_many_updates_of_a(tmp_path):
    cfg = _run("dial", tmp_path, train__updates=3)  # k = 2: loop 1 ends at 2 updates, loop 2 at 4
    cfg.train.iterations = 10
    m = train(cfg).metrics
    assert m["budget/actor_updates"].tolist() == [0, 2, 4]
    plain = _run("dial", tmp_path, swap="plain", train__updates=3)
    plain.train.iterations = 10
    assert train(plain).metrics["budget/actor_updates"].tolist() == [0, 1, 2, 3]


def test_a_kept_buffer_resumes_with_its_stored_advantages(tmp_path):
    cfg = _run("dial", tmp_path, swap__buffer="fifo")
    cfg.train.iterations = 1
    policy, report = initial_policy(cfg, progress_bar=False)
    first = Trainer(cfg, policy, start_report=report)
    first.run()
    kept = [(e.outcome, e.advantages, e.group, e.traj.group_id) for e in first.loop_buffer.entries]
    assert kept
    again = Trainer(cfg, initial_policy(cfg, progress_bar=False)[0], start_report=report)
    restore_newest(again)
    assert [(e.outcome, e.advantages, e.group, e.traj.group_id) for e in again.loop_buffer.entries] == kept
    assert again.budget == first.budget


def test_the_loops_batch_sizes_follow_the_papers_ratios_and_bad_ones_are_refused():
    cfg = preset("tiny", env="chain-4x2", swap=True)
    assert (cfg.on_policy_tasks, cfg.replayed_per_update, cfg.collect_tasks) == (7, 8, 14)
    with pytest.raises(ValueError, match=r"round\(α·B·N\) = 0 replayed"):
        preset("smoke", env="dial", swap=True, swap__offpolicy_share=0.1)
    with pytest.raises(ValueError, match="A needs at least one"):
        preset("smoke", env="dial", swap=True, swap__offpolicy_share=0.9)
    batch = LoopBatch([NS()], [[0.0]])
    assert batch.offpolicy == [False] and batch.stored_advantages == [None]


def test_the_loop_views_show_bs_steps_the_relabelled_collection_and_the_draws():
    from rspo_kit.swap.views import draws, explorer_steps, relabel_table

    rewards = RewardModel.build("dial")
    _, record, _ = _loop(rewards)
    steps = explorer_steps(record, rewards)
    assert steps["rollout"].tolist() == ["step 1", "step 2", "step 3", "collection"]
    table = relabel_table(record, rewards)
    assert len(table) == len(record.collection) and table["outcome"].tolist() == [
        e.outcome for e in record.collection
    ]
    assert table["drawn_by"].value_counts().drop(0, errors="ignore").to_dict() == {1: 4, 2: 4, 3: 4}
    assert (
        table.loc[table["drawn_by"] > 0, "outcome"].min()
        >= table.loc[table["drawn_by"] == 0, "outcome"].max()
    )
    d = draws(record)
    assert d["replayed"].tolist() == [4, 4, 4] and d["on_policy"].tolist() == [12, 12, 12]


def test_clip_windows_show_where_the_shifted_clip_centred_each_replayed_step(tmp_path):
    from rspo_kit.swap.views import clip_windows

    cfg = _run("dial", tmp_path)
    cfg.train.iterations = 1
    seen = {}

    class Capture:
        def on_update_end(self, event):
            seen["batch"] = event.data["batch"]

    train(cfg, callbacks=[Capture()])
    windows = clip_windows(seen["batch"], cfg.algo.clip_low, cfg.algo.clip_high)
    replayed_steps = sum(
        len(t.steps) for t, off in zip(seen["batch"].trajs, seen["batch"].offpolicy, strict=True) if off
    )
    assert len(windows) == replayed_steps > 0
    assert windows["pi_old"].tolist() == pytest.approx((windows["center"] * windows["pi_B"]).tolist())
    assert (windows["center"] != 1).any()  # B's step moved it off A: the window is not PPO's
    assert (windows["high"] - windows["low"]).tolist() == pytest.approx(
        [cfg.algo.clip_low + cfg.algo.clip_high] * len(windows)
    )
