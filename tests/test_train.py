"""The trainer end to end: configs, every algorithm x variant, the swap's core promise, resume, guards."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from lock_env import register_lock
from trainer_runs import assert_actor_gradient_is_the_same_under, trained_keeping_last_update

from rspo_kit.rewards.signals import RewardModel
from rspo_kit.train import EVENTS, RunConfig, Trainer, initial_policy, preset, train
from rspo_kit.train.update import (
    UpdateBatch,
    _backward,
    _prepare,
    batch_advantages,
    flatten,
    policy_gradient,
)

register_lock()
ALGOS = ("grpo", "ppo", "gigpo")


def _params(trainer: Trainer, role: str) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.pair.parameters(role)]


def _changed(before, after) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def _trainer(cfg: RunConfig, callbacks=()) -> Trainer:
    """A Trainer as ``train(cfg)`` builds it: the starting policy first, then the trainer of it."""
    policy, report = initial_policy(cfg, progress_bar=False)
    return Trainer(cfg, policy, callbacks, start_report=report)


def _smoke(env: str, algo: str, swap, tmp_path: Path, **overrides) -> RunConfig:
    cfg = preset("smoke", env=env, algo=algo, swap=swap, seed=0, **overrides)
    cfg.train.run_dir = str(tmp_path / f"{env}_{algo}_{swap}")
    cfg.train.threads = 1
    return cfg


# ------------------------------------------------------------------------------------------ config
def test_presets_name_the_variants():
    assert preset("tiny").swap.mode == "off"
    assert preset("tiny").policy.choice_score == "sum"
    rspo = preset("tiny", swap=True)
    assert (rspo.swap.mode, rspo.reward.train_on, rspo.swap.paper_loop) == ("rspo", "outcome", True)
    control = preset("tiny", swap="control")
    assert (control.swap.mode, control.swap.paper_loop) == ("control", True)
    assert preset("tiny", swap="process").reward.train_on == "process"
    assert preset("tiny", swap="mix").reward.train_on == "mix"
    # the paper's Algorithm 1: k = 3, α = 1/8, reward-based sampling, GePPO's shifted clip, D reset each loop
    s = rspo.swap
    assert (s.loop_steps, s.offpolicy_share, s.sampling, s.offpolicy_clip, s.buffer) == (
        3,
        0.125,
        "reward",
        "shifted",
        "loop",
    )
    assert (s.explorer_reward, s.replay_source, s.offpolicy_weighting, s.explorer_temperature) == (
        "dense",
        "explorer",
        "explicit",
        None,
    )
    # the earlier design, as its studies ran: B re-synced every iteration, truncated IS weights
    g = preset("tiny", swap="group_mixing").swap
    assert (g.mode, g.paper_loop, g.sync_every, g.explorer_updates) == ("group_mixing", False, 1, 1)
    assert (g.replay_filter, g.replay_ratio, g.offpolicy_clip, g.is_clip) == (
        "success",
        0.25,
        "truncated_is",
        2.0,
    )


def test_a_config_of_the_earlier_design_reads_as_group_mixing():
    old = preset("tiny", swap=True).to_dict()
    for key in ("loop_steps", "offpolicy_clip"):
        old["swap"].pop(key)
    old["swap"]["offpolicy_weight"] = "truncated_is"
    cfg = RunConfig.from_dict(old)
    assert (cfg.swap.mode, cfg.swap.offpolicy_clip, cfg.swap.explorer_updates) == (
        "group_mixing",
        "truncated_is",
        1,
    )
    old["swap"]["mode"] = "control"
    assert RunConfig.from_dict(old).swap.explorer_updates == 0  # its control: B = A


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: preset("tiny", algo="sac"), ["AlgoConfig.name", "'sac'", "gigpo"]),
        (lambda: preset("tiny", swap="maybe"), ["'maybe'", "control"]),
        (lambda: preset("nope"), ["'nope'", "tiny"]),
        (
            lambda: preset("tiny", swap__replay_filter="best"),
            ["SwapConfig.replay_filter", "'best'", "success"],
        ),
        (lambda: preset("tiny").override("algo.lr", "-1").validate(), ["AlgoConfig.lr", "-1", "> 0"]),
        (lambda: preset("tiny").override("algo.learning_rate", "1"), ["algo.learning_rate"]),
        (
            lambda: preset("tiny", swap=True, swap__sync_every=-1),
            ["SwapConfig.sync_every", "-1", ">= 1", "0 (never again)"],
        ),
        (
            lambda: preset("tiny", swap=True, swap__explorer_temperature=0.0),
            ["SwapConfig.explorer_temperature", "0.0", "None", "> 0"],
        ),
        (
            lambda: preset("tiny", policy__choice_score="max"),
            ["PolicyConfig.choice_score", "'max'", "'sum', 'mean'"],
        ),
        (
            lambda: preset("tiny", policy__choice_score="mean"),  # tiny warm-starts by SFT on summed scores
            ["policy.choice_score = 'mean'", "policy.warmstart = True", "'sum'", "policy.warmstart = false"],
        ),
        (
            lambda: preset("tiny", swap=True, swap__sampling="best"),
            ["SwapConfig.sampling", "'best'", "'reward', 'variance', 'random'"],
        ),
        (
            lambda: preset("tiny", swap=True, swap__offpolicy_share=1.0),
            ["SwapConfig.offpolicy_share", "1.0", "in [0, 1)"],
        ),
    ],
)
def test_bad_values_raise_naming_field_value_and_allowed(make, words):
    with pytest.raises(ValueError) as err:
        make()
    for word in words:
        assert word in str(err.value)


def test_overrides_coerce_and_configs_round_trip():
    cfg = preset("tiny").override("algo.lr", "3e-4").override("train.iterations", "7")
    cfg.override("policy.warmstart", "false").override("env.max_steps", "none")
    assert (cfg.algo.lr, cfg.train.iterations, cfg.policy.warmstart, cfg.env.max_steps) == (
        3e-4,
        7,
        False,
        None,
    )
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_the_explorer_lr_follows_the_actor_lr_unless_set():
    assert preset("tiny", swap=True).explorer_lr == 1e-4  # the paper's loop: X's own lr for B
    assert preset("tiny", swap=True, algo__lr=3e-4).explorer_lr == 3e-4  # follows an lr override
    assert preset("gpu", swap=True).explorer_lr == 1e-6
    assert preset("tiny", swap="group_mixing").explorer_lr == 5e-5  # the earlier design: half
    pinned = preset("tiny", swap=True, algo__lr=3e-4, swap__explorer_lr="2e-4")
    assert pinned.explorer_lr == 2e-4
    with pytest.raises(ValueError, match=r"SwapConfig\.explorer_lr"):
        preset("tiny", swap=True, swap__explorer_lr=0.0)


# ------------------------------------------------------------------------------- end to end (lock)
@pytest.mark.parametrize("swap", ["plain", "rspo", "control", "process", "mix", "group_mixing"])
@pytest.mark.parametrize("algo", ALGOS)
def test_every_algorithm_and_variant_learns_on_the_lock(algo, swap, tmp_path):
    cfg = _smoke("dial", algo, swap, tmp_path, swap__replay_filter="all", algo__group_size=4)
    seen = {name: 0 for name in EVENTS}
    batches = []

    class Count:
        def on_update_end(self, event):
            seen["on_update_end"] += 1
            batches.append(event.data.get("batches", [event.data["batch"]]))

        def __getattr__(self, name):
            if name not in seen:
                raise AttributeError(name)
            return lambda event: seen.__setitem__(name, seen[name] + 1)

    trainer = _trainer(cfg, callbacks=[Count()])
    actor0 = _params(trainer, "actor")
    result = trainer.run()
    m = result.metrics
    assert list(m["iteration"]) == [0, 1, 2]
    last = m.iloc[-1]
    for key in (
        "rollout/success",
        "rollout/cumulative_env_steps",
        "loss/policy",
        "loss/approx_kl",
        "adv/mean",
        "eval/success",
    ):
        assert key in m and math.isfinite(last[key]), key
    assert all(math.isfinite(v) for k, v in last.items() if k.startswith("loss/"))
    assert _changed(actor0, _params(trainer, "actor")), "the actor's update left its parameters unchanged"
    assert seen["on_update_end"] == 2 and seen["on_eval"] == 3 and seen["on_checkpoint"] == 2
    k = cfg.swap.loop_steps
    if swap in ("rspo", "control"):  # the paper's loop: k updates of A (and of B under rspo) a loop
        for key in (
            "swap/collect_success",
            "swap/buffer_size",
            "swap/drawn_outcome_mean",
            "offpolicy/clip_frac",
        ):
            assert key in m, key
        b_steps = k if swap == "rspo" else 0
        assert (last["budget/actor_updates"], last["budget/explorer_updates"]) == (2 * k, 2 * b_steps)
        assert seen["on_swap"] == 2 and seen["on_rollout_end"] == 2 * (b_steps + 1 + k)
    if swap == "group_mixing":
        for key in (
            "swap/rescued_groups",
            "swap/replay_success_rate",
            "swap/zero_var_groups_after",
            "is/mean",
        ):
            assert key in m, key
        assert seen["on_swap"] == 2 and seen["on_rollout_end"] == 4
    if not cfg.swap.paper_loop:  # one update of A an iteration; group_mixing's B one dense update too
        explorer_updates = 2 * cfg.swap.explorer_updates if swap == "group_mixing" else 0
        assert (last["budget/actor_updates"], last["budget/explorer_updates"]) == (2, explorer_updates)
    if swap in ("rspo", "control", "group_mixing"):
        # env steps count both policies' rollouts: RSPO must win at equal budget, not equal iterations
        assert (
            last["rollout/cumulative_env_steps"]
            == last["budget/env_steps"]
            == m["rollout/env_steps"].sum() + m["explorer_rollout/env_steps"].sum()
        )
    if algo == "ppo":
        assert math.isfinite(last["loss/value"])
    # the turn table holds the advantages the actor's updates used, PPO's (over its critic) included
    table = pd.read_parquet(Path(cfg.train.run_dir) / "turns" / "iter_00002.parquet")
    updated = batches[-1]  # the last iteration's batches of A: k under the paper's loop, else one
    assert len(updated) == (k if cfg.swap.paper_loop else 1)
    for batch in updated:
        assert batch.advantages_cfg == cfg.algo
        assert len(batch.advantages) == sum(len(t.steps) for t in batch.trajs)
    actor = table[table["role"].isin(["actor", "replay"])]
    used = torch.cat([b.advantages for b in updated])
    assert actor["advantage"].tolist() == pytest.approx(used.tolist())
    assert actor["advantage"].abs().sum() > 0
    if algo == "ppo":  # GAE whitened over each batch: not the returns-to-go a viewer could recompute
        for batch in updated:
            assert float(batch.advantages.mean()) == pytest.approx(0.0, abs=1e-5)
        assert actor["advantage"].mean() == pytest.approx(0.0, abs=1e-5)
    else:  # the critic-free estimators: the viewers' recomputation is the same
        for batch in updated:
            assert batch.advantages.tolist() == pytest.approx(batch_advantages(batch, cfg.algo).step.tolist())
    if swap == "group_mixing":  # its explorer's fresh rollout carries no advantage yet
        assert table[table["role"] == "explorer"]["advantage"].isna().all()
    if swap == "rspo":  # B's dense batches carry the advantages of B's updates
        assert table[table["role"] == "explorer"]["advantage"].notna().all()


# ----------------------------------------------------------------------------- the real envs
@pytest.mark.parametrize("swap", ["plain", "rspo"])
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("env", ["alfworld", "webshop"])
def test_one_iteration_on_each_real_env(env, algo, swap, tmp_path):
    # one loop of k = 1 (B's dense step, its collection, A's step): the real envs' rollouts are the cost
    cfg = _smoke(env, algo, swap, tmp_path, swap__loop_steps=1)
    cfg.train.iterations, cfg.train.eval_n = 1, 1
    trainer = _trainer(cfg)
    actor0, explorer0 = _params(trainer, "actor"), _params(trainer, "explorer")
    m = trainer.run().metrics.iloc[-1]
    assert all(math.isfinite(v) for k, v in m.items() if "loss/" in k), m
    # parameters move exactly when the update had a learning signal (PPO's critic always gives one)
    signal_actor = m["adv/abs_mean"] > 0
    assert _changed(actor0, _params(trainer, "actor")) == bool(signal_actor)
    if swap == "rspo":
        assert "swap/collect_success" in m and m["explorer_rollout/env_steps"] > 0
        assert (m["budget/actor_updates"], m["budget/explorer_updates"]) == (1, 1)
        assert m["budget/env_steps"] == m["budget/env_steps_actor"] + m["budget/env_steps_explorer"]
        if trainer.pair.lora is False:
            assert _changed(explorer0, _params(trainer, "explorer")) == bool(m["explorer/adv/abs_mean"] > 0)


# --------------------------------------------------------------------------- the swap's promise
def test_process_rewards_never_reach_the_actor_but_drive_the_explorer(tmp_path):
    """Under RSPO with a misaligned process reward, the actor's gradient equals the outcome gradient: its
    batch's rewards and the stored advantages of its replayed trajectories are the outcome's alone."""
    cfg = _smoke("dial", "gigpo", True, tmp_path, reward__misalign_eps=1.0)
    cfg.train.iterations = 1
    trainer, last = trained_keeping_last_update(cfg)
    batch, record = last["batch"], last["record"]
    assert any(batch.offpolicy), "A's batch should hold replayed explorer trajectories"
    # the same trajectories scored by outcome under a different (aligned) process reward
    aligned = RewardModel.build("dial", process="subgoal", misalign_eps=0.0)
    # A_off, stored at the collection, is X's advantage within B's collection groups under the outcome
    collected = [e.traj for e in record.collection]
    recomputed = batch_advantages(
        UpdateBatch(collected, aligned.batch_rewards(collected, "outcome")), cfg.algo
    )
    stored = [a for e in record.collection for a in e.advantages]
    assert stored == pytest.approx(recomputed.step.tolist())
    assert_actor_gradient_is_the_same_under(trainer, cfg, batch, aligned)
    # the explorer's objective does see the process reward: misaligned vs aligned differ on its dense batch
    explorer = trainer._learner("explorer")
    trajs = record.explorer[-1].trajs
    misaligned = trainer.rewards.batch_rewards(trajs, "process")
    assert record.explorer[-1].rewards == misaligned  # what B's last dense step trained on
    assert misaligned != aligned.batch_rewards(trajs, "process")
    g_hack = policy_gradient(explorer, UpdateBatch(trajs, misaligned), cfg.algo)
    g_good = policy_gradient(explorer, UpdateBatch(trajs, aligned.batch_rewards(trajs, "process")), cfg.algo)
    assert any(not torch.allclose(a, b) for a, b in zip(g_hack, g_good, strict=True) if a is not None)


def test_ppo_critics_start_from_the_runs_seed(tmp_path):
    """One config builds the same critics whatever torch's global random state; another seed does not."""
    heads = []
    for k, seed in enumerate((0, 0, 1)):
        torch.manual_seed(100 + k)  # a different global state before each build
        cfg = _smoke("dial", "ppo", True, tmp_path / str(k))
        cfg.train.seed = seed
        trainer = _trainer(cfg)
        heads.append({r: _params_of(trainer._learner(r).value_head) for r in ("actor", "explorer")})
    assert not any(_changed(heads[0][r], heads[1][r]) for r in ("actor", "explorer"))
    assert _changed(heads[0]["actor"], heads[2]["actor"])
    assert _changed(heads[0]["actor"], heads[0]["explorer"])


def _params_of(module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


# ------------------------------------------------------------------- micro-batched minibatches
def _captured_batch(tmp_path, algo):
    """The last batch of A's first loop: on-policy steps and replayed ones under the shifted clip."""
    cfg = _smoke("dial", algo, True, tmp_path)
    cfg.train.iterations = 1
    trainer, last = trained_keeping_last_update(cfg)
    return cfg, trainer._learner("actor"), last["batch"]


def _grads(learner) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.clone() for p in learner.params]


@pytest.mark.parametrize("algo", ALGOS)
def test_microbatched_backward_accumulates_the_one_pass_gradient(algo, tmp_path):
    """Passes of 3 steps give the gradient of the whole minibatch in one pass (``policy_gradient``)."""
    cfg, actor, batch = _captured_batch(tmp_path, algo)
    assert any(batch.offpolicy), "the minibatch should hold replayed (off-policy) steps"
    temperature = cfg.policy.temperature
    reference = policy_gradient(actor, batch, cfg.algo, cfg.swap.offpolicy, temperature=temperature)
    flat = flatten(batch)
    assert len(flat.steps) > 6, "needs several passes"
    cfg.algo.microbatch_steps = 3
    _, adv, units = _prepare(actor, flat, cfg.algo, cfg.swap.offpolicy, temperature)
    # the replayed steps' clip windows are GePPO's, centred off 1
    assert any(bool((c != 1).any()) for c, off in zip(units.center, flat.offpolicy, strict=True) if off)
    _, order, hidden = _backward(
        actor, flat, adv, list(range(len(flat.steps))), units, cfg.algo, temperature, None
    )
    assert sorted(order) == list(range(len(flat.steps)))
    assert (hidden is not None) == (algo == "ppo") and (hidden is None or len(hidden) == len(order))
    assert any(g is not None and g.abs().sum() > 0 for g in reference)
    for a, b in zip(reference, _grads(actor), strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)


def test_microbatch_size_changes_neither_gradient_nor_metrics(tmp_path):
    """With the entropy bonus and a KL to a (perturbed) reference, passes of 1, 4 or all steps agree."""
    import copy
    from contextlib import nullcontext

    cfg, actor, batch = _captured_batch(tmp_path, "gigpo")
    cfg.algo.entropy_coef, cfg.algo.kl_coef = 0.01, 0.1
    ref = copy.deepcopy(actor.policy)
    with torch.no_grad():
        for p in ref.model.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    flat = flatten(batch)
    sel = list(range(len(flat.steps)))
    _, adv, units = _prepare(actor, flat, cfg.algo, cfg.swap.offpolicy, 1.0)
    results = []
    for size in (len(sel), 4, 1):
        cfg.algo.microbatch_steps = size
        metrics, _, _ = _backward(actor, flat, adv, sel, units, cfg.algo, 1.0, lambda: nullcontext(ref))
        results.append((metrics, _grads(actor)))
    (m_one, g_one), *others = results
    assert m_one["loss/kl_ref"] > 0 and m_one["loss/entropy"] > 0
    for metrics, grads in others:
        assert metrics.keys() == m_one.keys()
        for k, v in metrics.items():
            assert v == pytest.approx(m_one[k], rel=1e-4, abs=1e-7), k
        for a, b in zip(g_one, grads, strict=True):
            if a is not None:
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)


# ------------------------------------------------------------------------ KL to the reference
@pytest.mark.parametrize("lora", [False, True])
def test_a_positive_kl_coef_changes_the_update(lora, tmp_path):
    """``algo.kl_coef`` reaches the update: LoRA's base without adapters, or a frozen copy of the start."""
    runs = {}
    for kl in (0.0, 0.5):
        cfg = _smoke("dial", "ppo", "plain", tmp_path / f"kl{kl}", algo__kl_coef=kl, algo__minibatch_steps=2)
        cfg.policy.lora, cfg.policy.lora_rank = lora, 4
        trainer = _trainer(cfg)
        # the frozen third model copy exists only where a KL penalty reads it (LoRA needs none)
        assert (trainer.pair._reference is not None) == (kl > 0 and not lora)
        runs[kl] = (trainer.run().metrics, _params(trainer, "actor"))
    (plain, before), (penalised, after) = runs[0.0], runs[0.5]
    assert "loss/kl_ref" not in plain and (penalised["loss/kl_ref"].iloc[1:] > 0).all()
    # the same seed and the same first rollout: only the penalty tells the two updates apart
    assert plain["rollout/success"].iloc[1] == penalised["rollout/success"].iloc[1]
    assert _changed(before, after)


def test_an_update_with_a_kl_coef_and_no_reference_is_an_error(tmp_path):
    from dataclasses import replace

    from rspo_kit.train.update import update

    cfg, actor, batch = _captured_batch(tmp_path, "grpo")
    with pytest.raises(ValueError, match=r"algo.kl_coef = 0.1 needs the reference policy"):
        update(actor, batch, replace(cfg.algo, kl_coef=0.1), cfg.swap.offpolicy)


# ---------------------------------------------------------------------------------- resume
RUNNER = """
import sys, json
sys.path.insert(0, {tests!r})
from lock_env import register_lock
register_lock()
from rspo_kit.train import preset, train
cfg = preset("smoke", env="dial", algo="gigpo", swap=True, seed=3)
cfg.train.iterations, cfg.train.threads, cfg.train.run_dir = 5, 1, sys.argv[1]
if len(sys.argv) > 2:
    train(resume=sys.argv[1])
else:
    train(cfg)
"""


def _comparable(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rows]


def test_resume_after_sigkill_reproduces_the_uninterrupted_run(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(RUNNER.format(tests=str(Path(__file__).parent)))
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    full, killed = tmp_path / "full", tmp_path / "killed"
    subprocess.run([sys.executable, str(script), str(full)], check=True, env=env, capture_output=True)

    proc = subprocess.Popen([sys.executable, str(script), str(killed)], env=env, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "ckpt-00002").is_dir() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (killed / "ckpt-00002").is_dir(), "the run ended before it could be killed"
    assert not (killed / "ckpt-00005").exists()
    subprocess.run(
        [sys.executable, str(script), str(killed), "resume"], check=True, env=env, capture_output=True
    )
    assert _comparable(killed) == _comparable(full)


def test_a_run_dir_with_a_checkpoint_of_the_same_run_is_continued(tmp_path):
    from rspo_kit.train import resumable

    cfg = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=2)
    run_dir = Path(cfg.train.run_dir)
    assert resumable(cfg) is None  # nothing there yet
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"iteration": 7}\n')  # killed before its first checkpoint
    assert resumable(cfg) is None
    train(cfg)
    assert [r["iteration"] for r in _comparable(run_dir)] == [0, 1, 2]  # the stale row is gone

    # killed after iteration 2 of 3 (a sweep cell rerun with other threads): continued, not redone;
    # the settings of a warm start this run does not do (policy.warmstart is off) do not matter
    longer = _smoke(
        "dial", "grpo", "plain", tmp_path, train__iterations=3, train__threads=2, policy__sft_minutes=2.0
    )
    assert resumable(longer) == run_dir
    m = train(longer, resume=resumable(longer)).metrics
    assert m["iteration"].tolist() == [0, 1, 2, 3]
    assert [r["iteration"] for r in _comparable(run_dir)] == [0, 1, 2, 3]

    other = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=3, algo__lr=1e-2)
    with pytest.raises(
        ValueError, match=r"another configuration \(algo.lr: .* there, 0.01 here; swap.explorer_lr"
    ):
        resumable(other)
    # a run stored with an explicit explorer lr equal to what None means now is the same run
    stored = json.loads((run_dir / "config.json").read_text())
    stored["swap"]["explorer_lr"] = longer.explorer_lr  # plain: algo.lr, as for the paper's loop
    assert longer.swap.explorer_lr is None and longer.explorer_lr == longer.algo.lr
    (run_dir / "config.json").write_text(json.dumps(stored))
    assert resumable(longer) == run_dir
    faster = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=3, swap__explorer_lr=1e-2)
    with pytest.raises(ValueError, match=r"swap.explorer_lr: .* there, 0.01 here"):
        resumable(faster)
    warm = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=3, policy__warmstart=True)
    with pytest.raises(ValueError, match=r"policy.warmstart: False there, True here"):
        resumable(warm)


def test_non_finite_rewards_stop_the_run_and_name_the_last_checkpoint(tmp_path, monkeypatch):
    cfg = _smoke("dial", "grpo", "plain", tmp_path)
    cfg.train.iterations = 3
    trainer = _trainer(cfg)
    calls = {"n": 0}
    original = trainer.rewards.batch_rewards

    def poisoned(trajs, signal):
        calls["n"] += 1
        rewards = original(trajs, signal)
        return [[math.nan] * len(r) for r in rewards] if calls["n"] >= 2 else rewards

    monkeypatch.setattr(trainer, "rewards", type("R", (), {})())
    trainer.rewards.batch_rewards = poisoned
    trainer.rewards.outcome_return = original.__self__.outcome_return
    trainer.rewards.process_steps = original.__self__.process_steps
    with pytest.raises(RuntimeError, match="ckpt-00001"):
        trainer.run()


def test_a_learned_prm_drives_the_explorer(tmp_path):
    """Fit a PRM on logged lock episodes, save it, and train RSPO with it as the process reward."""
    from rspo_kit.envs import list_tasks
    from rspo_kit.envs.batch import BatchRunner
    from rspo_kit.policy.rollout import RolloutConfig, rollout
    from rspo_kit.rewards.learned import PRMConfig, fit_prm

    first = _smoke("dial", "grpo", "plain", tmp_path)
    policy, _ = initial_policy(first, progress_bar=False)
    rcfg = RolloutConfig(8, first.policy.temperature, max_new_tokens=first.policy.max_new_tokens)
    with BatchRunner("dial", n_workers=0) as runner:
        tasks = list_tasks("dial", split="train", n=first.env.train_tasks)
        logged = rollout(policy, runner, tasks, rcfg, iteration=1, seed=0)
    prm = fit_prm(logged, PRMConfig(epochs=50))
    prm.save(tmp_path / "prm")
    cfg = _smoke("dial", "grpo", True, tmp_path, reward__process="learned", reward__prm=str(tmp_path / "prm"))
    cfg.train.iterations = 1
    m = train(cfg).metrics.iloc[-1]
    assert math.isfinite(m["explorer/loss/policy"]) and m["explorer/adv/abs_mean"] > 0


def test_an_env_step_budget_ends_the_run_with_an_evaluation_of_every_final_split(tmp_path, monkeypatch):
    import rspo_kit.train.evaluation as evaluation_module

    calls = []

    def counting(policy, env, split, n, **kwargs):
        calls.append((split, n) if kwargs["greedy"] else (split, n, "sampled"))
        return evaluate(policy, env, split, n, **kwargs)

    evaluate = evaluation_module.evaluate
    monkeypatch.setattr(evaluation_module, "evaluate", counting)
    cfg = _smoke(
        "dial",
        "grpo",
        True,
        tmp_path,
        train__iterations=100,
        train__max_env_steps=40,
        train__eval_split="valid",
        train__final_eval_split="eval, eval_unseen",
        train__final_eval_n=3,
        train__final_eval_sampled=True,
    )
    cfg.env.train_tasks = 7  # the eighth is dial's valid split
    m = train(cfg).metrics
    steps = m["rollout/cumulative_env_steps"]
    assert steps.iloc[-1] >= 40 and steps.iloc[-2] < 40 and len(m) < 100
    assert math.isfinite(m["eval/success"].iloc[-1])
    # the test splits are evaluated once, at the end, on final_eval_n tasks each; valid periodically
    for split in ("eval", "eval_unseen"):
        for kind in ("final", "final_sampled"):  # greedy and, asked for, sampled
            assert m[f"{kind}/{split}/success"].notna().tolist() == [False] * (len(m) - 1) + [True]
    n = cfg.train.eval_n
    assert calls[-4:] == [
        ("eval", 3),
        ("eval", 3, "sampled"),
        ("eval_unseen", 3),
        ("eval_unseen", 3, "sampled"),
    ]
    assert set(calls[:-4]) == {("valid", n)} and len(calls) - 4 == m["eval/success"].notna().sum()
    # every final episode is recorded, and they add up to the metrics
    from rspo_kit.records import load_episodes

    episodes = load_episodes(cfg.train.run_dir)
    assert len(episodes) == 4 * 3 and set(episodes["sample"]) == {0}
    for prefix, ep in episodes.groupby("evaluation"):
        assert ep["task_id"].is_unique and ep["won"].mean() == m[f"{prefix}/success"].iloc[-1]
        assert ep["steps"].mean() == m[f"{prefix}/episode_steps"].iloc[-1]


def test_a_sampled_only_final_evaluation_plays_no_greedy_episode(tmp_path):
    from rspo_kit.records import load_episodes

    cfg = _smoke(
        "dial",
        "grpo",
        False,
        tmp_path,
        train__iterations=1,
        train__final_eval_split="eval",
        train__final_eval_n=3,
        train__final_eval_sampled=True,
        train__final_eval_greedy=False,
    )
    m = train(cfg).metrics
    assert m["final_sampled/eval/tasks"].iloc[-1] == 3
    assert not any(c.startswith("final/") for c in m.columns)
    assert set(load_episodes(cfg.train.run_dir)["evaluation"]) == {"final_sampled/eval"}
    with pytest.raises(ValueError, match="final_eval_greedy = False: must be True, or final_eval_sampled"):
        preset("smoke", train__final_eval_split="eval", train__final_eval_greedy=False).validate()


def test_a_run_of_no_iterations_gives_its_starting_policy_every_final_evaluation(tmp_path):
    """What ``make sweep`` does with its warm start, so that every variant can be compared with it."""
    from rspo_kit.records import load_episodes

    cfg = _smoke(
        "dial",
        "grpo",
        "plain",
        tmp_path,
        train__iterations=0,
        train__eval_n=0,  # no start evaluation: the final ones alone
        train__final_eval_split="eval,eval_unseen",
        train__final_eval_n=3,
        train__final_eval_sampled=True,
    )
    m = train(cfg).metrics
    assert m["iteration"].tolist() == [0] and "eval/success" not in m
    episodes = load_episodes(cfg.train.run_dir)
    for prefix in ("final/eval", "final_sampled/eval", "final/eval_unseen", "final_sampled/eval_unseen"):
        ep = episodes[episodes["evaluation"] == prefix]
        assert len(ep) == 3 and ep["won"].mean() == m[f"{prefix}/success"].iloc[-1]


def test_unknown_evaluation_splits_fail_before_training(tmp_path):
    cfg = _smoke("alfworld", "grpo", "plain", tmp_path, train__final_eval_split="eval,test")
    with pytest.raises(ValueError, match=r"train\.final_eval_split: .*'test'"):
        train(cfg)
    assert not (Path(cfg.train.run_dir) / "metrics.jsonl").exists()
    # a registered env that has no tasks in a split
    from lock_env import CombinationLock, lock_tasks

    from rspo_kit.envs import register_env

    register_env(
        "dial_no_unseen",
        CombinationLock,
        lambda split: [] if split == "eval_unseen" else lock_tasks(split),
        overwrite=True,
    )
    cfg = _smoke("dial_no_unseen", "grpo", "plain", tmp_path, train__final_eval_split="eval_unseen")
    with pytest.raises(ValueError, match="dial_no_unseen has no tasks in split 'eval_unseen'"):
        train(cfg)


@pytest.mark.parametrize("swap", ["rspo", "group_mixing"])
def test_iteration_time_is_split_into_parts(swap, tmp_path):
    """The perf/* parts the benchmark reads exist and fit inside the iteration's wall time."""
    cfg = _smoke("dial", "gigpo", swap, tmp_path, train__iterations=1)
    m = train(cfg).metrics.iloc[-1]
    if swap == "group_mixing":  # one rollout of each policy, one update of each
        parts = [
            f"perf/{role}_{part}_s"
            for role in ("rollout", "explorer_rollout")
            for part in ("prompt", "model", "env")
        ]
        parts += ["perf/update_prepass_s", "perf/update_advantages_s", "perf/update_minibatch_s"]
        parts += ["perf/explorer_update_s", "perf/swap_s", "perf/tables_s", "perf/eval_s"]
        assert all(m[p] >= 0 for p in parts), m[parts]
        assert sum(m[p] for p in parts) <= m["perf/iteration_s"]
        return
    # the paper's loop: each role's rollouts and updates timed whole, k updates of A and of B
    k, roles = cfg.swap.loop_steps, ("actor", "explorer", "collection")
    whole = [f"perf/{role}_rollout_s" for role in roles]
    whole += ["perf/actor_update_s", "perf/explorer_update_s", "perf/tables_s", "perf/eval_s"]
    assert all(m[p] >= 0 for p in whole), m[whole]
    assert sum(m[p] for p in whole) <= m["perf/iteration_s"]
    # an update's parts are the mean over the loop's updates of that role: k of them fit in its time
    for prefix, role in (("perf/update", "actor"), ("perf/explorer_update", "explorer")):
        inner = [f"{prefix}_{part}_s" for part in ("prepass", "advantages", "minibatch")]
        assert all(m[p] >= 0 for p in inner) and k * sum(m[p] for p in inner) <= m[f"perf/{role}_update_s"]
    # each role's rollouts split into prompts, model and env, as the benchmark reads them
    for role in roles:
        split = [f"perf/{role}_rollout_{part}_s" for part in ("prompt", "model", "env")]
        assert all(p in m for p in split), f"the loop records no {split}"
        assert all(m[p] >= 0 for p in split) and sum(m[p] for p in split) <= m[f"perf/{role}_rollout_s"]


def test_tuning_on_valid_refuses_train_tasks_that_overlap_it(tmp_path):
    # "dial" has 8 train tasks; the last one is its valid split
    cfg = _smoke("dial", "grpo", "plain", tmp_path, train__eval_split="valid")
    assert cfg.env.train_tasks == 8
    with pytest.raises(ValueError, match=r"env.train_tasks=8 overlaps the valid split .* at most 7"):
        train(cfg)
    cfg.env.train_tasks = 7
    m = train(cfg).metrics
    assert m["eval/success"].notna().all()


def test_a_runs_trained_actor_loads_read_only_and_evaluates_from_the_cli(tmp_path, capsys):
    from rspo_kit.evaluate.__main__ import main as evaluate_main
    from rspo_kit.train.setup import trained_actor

    cfg = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=2)
    trainer = _trainer(cfg)
    start = _params(trainer, "actor")
    trainer.run()
    run_dir = Path(cfg.train.run_dir)
    files = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    actor = trained_actor(run_dir)
    loaded = [p.detach() for p in actor.model.parameters()]
    assert not _changed(_params(trainer, "actor"), loaded) and _changed(start, loaded)
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == files  # nothing written
    assert evaluate_main(["--policy", str(run_dir), "--env", "dial", "--n", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == 3
    out = tmp_path / "episodes" / "eval.csv"
    assert evaluate_main(["--policy", str(run_dir), "--env", "dial", "--n", "3", "--episodes", str(out)]) == 0
    shown = json.loads(capsys.readouterr().out)
    episodes = pd.read_csv(out)
    assert "episodes" not in shown and len(episodes) == 3 and episodes["won"].mean() == shown["success"]
    with pytest.raises(FileNotFoundError, match="not a training run"):
        trained_actor(tmp_path)


def test_the_policy_evaluation_does_not_import_the_trainer():
    """The library function sits below the trainer; the CLI that loads a run's actor is above both."""
    code = "import sys, rspo_kit.policy.evaluate; print([m for m in sys.modules if m.startswith('rspo_kit.train')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    help_text = subprocess.run(
        [sys.executable, "-m", "rspo_kit.evaluate", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--policy" in help_text and "--episodes" in help_text


def test_the_trainer_trains_the_policy_it_is_given_and_builds_no_warm_start(tmp_path, monkeypatch):
    """The warm start happens before the Trainer (``train`` builds it); neither the Trainer nor
    ``trained_actor`` builds or installs one, even for a configuration that warm-starts."""
    import rspo_kit.policy.sft as sft_module
    import rspo_kit.train.setup as setup_module
    import rspo_kit.train.trainer as trainer_module
    from rspo_kit.policy.models import weights_digest
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.records import read_start
    from rspo_kit.train.setup import trained_actor

    def no_warm_start(*args, **kwargs):
        raise AssertionError("a warm start was built")

    monkeypatch.setattr(trainer_module, "initial_policy", no_warm_start)
    monkeypatch.setattr(setup_module, "initial_policy", no_warm_start)
    monkeypatch.setattr(sft_module, "warm_start", no_warm_start)
    cfg = _smoke("dial", "grpo", "plain", tmp_path, policy__warmstart=True, train__iterations=1)
    policy = Policy.load(cfg.policy.preset, seed=7)  # not the seed-0 preset the config would build
    digest = weights_digest(policy.model)
    trainer = Trainer(cfg, policy, start_report={"warmstart": "given"})
    assert trainer.pair.policy("actor").model is policy.model  # trained in place: it is the actor
    trainer.run()
    assert read_start(cfg.train.run_dir) == {"warmstart": "given", "weights_sha256": digest}
    actor = trained_actor(cfg.train.run_dir)
    assert not _changed(_params(trainer, "actor"), [p.detach() for p in actor.model.parameters()])


def test_a_run_records_the_digest_of_the_policy_it_started_from_once(tmp_path):
    from rspo_kit.policy.models import weights_digest
    from rspo_kit.records import read_start, write_start
    from rspo_kit.train import resumable
    from rspo_kit.train.setup import initial_policy

    cfg = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=1)
    train(cfg)
    start = read_start(cfg.train.run_dir)
    base, _ = initial_policy(cfg, progress_bar=False)
    assert start["warmstart"] is None and start["preset"] == cfg.policy.preset
    assert start["weights_sha256"] == weights_digest(base.model)
    # a resumed run keeps the record of its first start
    path = Path(cfg.train.run_dir) / "start.json"
    path.write_text(json.dumps({**start, "warmstart": "first"}))
    longer = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=2)
    train(longer, resume=resumable(longer))
    assert read_start(cfg.train.run_dir)["warmstart"] == "first"
    assert write_start(cfg.train.run_dir, {"other": 1}) is False
    assert read_start(tmp_path / "nowhere") is None


def test_a_finished_run_resumed_with_other_final_splits_evaluates_only_what_it_lacks(tmp_path, monkeypatch):
    import rspo_kit.train.evaluation as evaluation_module
    from rspo_kit.train import resumable

    calls = []
    evaluate = evaluation_module.evaluate

    def counting(policy, env, split, n, **kwargs):
        calls.append((split, n, "greedy" if kwargs["greedy"] else "sampled"))
        return evaluate(policy, env, split, n, **kwargs)

    monkeypatch.setattr(evaluation_module, "evaluate", counting)
    first = _smoke("dial", "grpo", "plain", tmp_path, train__iterations=2, train__final_eval_split="eval")
    train(first)
    before = _comparable(Path(first.train.run_dir))
    assert ("eval", 2, "greedy") in calls[-1:]

    # the same run, now asked for both test splits and sampled evaluation too: no training, three evaluations
    calls.clear()
    more = _smoke(
        "dial",
        "grpo",
        "plain",
        tmp_path,
        train__iterations=2,
        train__final_eval_split="eval,eval_unseen",
        train__final_eval_sampled=True,
    )
    assert resumable(more) == Path(first.train.run_dir)
    m = train(more, resume=resumable(more)).metrics
    assert calls == [("eval", 2, "sampled"), ("eval_unseen", 2, "greedy"), ("eval_unseen", 2, "sampled")]
    assert m["iteration"].tolist() == [0, 1, 2]
    after = _comparable(Path(first.train.run_dir))
    assert after[:-1] == before[:-1]  # the training rows are untouched
    last = m.iloc[-1]
    assert last["final/eval/success"] == before[-1]["final/eval/success"]  # kept, not evaluated again
    for key in ("final_sampled/eval", "final/eval_unseen", "final_sampled/eval_unseen"):
        assert last[f"{key}/tasks"] == 2 and 0 <= last[f"{key}/success"] <= 1

    # the checkpoint holds the added evaluations: once more changes nothing; more tasks evaluate again
    calls.clear()
    train(more, resume=resumable(more))
    assert calls == []
    more.train.final_eval_n = 3
    train(more, resume=resumable(more))
    assert [c[1] for c in calls] == [3, 3, 3, 3]
    # each evaluation's episodes once, the last time it ran
    from rspo_kit.records import load_episodes

    episodes = load_episodes(first.train.run_dir)
    assert episodes.groupby("evaluation").size().to_dict() == {
        k: 3 for k in ("final/eval", "final_sampled/eval", "final/eval_unseen", "final_sampled/eval_unseen")
    }


def test_saving_the_same_iteration_again_never_leaves_the_run_without_a_checkpoint(tmp_path):
    from rspo_kit.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

    module = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)

    def save(rows):
        return save_checkpoint(tmp_path, 3, {"m": module}, {"m": opt}, {"rows": rows}, {})

    first = save([1])
    assert latest_checkpoint(tmp_path) == first
    # killed between moving the old copy aside and putting the new one in place
    first.rename(first.with_name("ckpt-00003.old"))
    found = latest_checkpoint(tmp_path)
    assert found is not None and load_checkpoint(found, {"m": module}, {"m": opt})[0]["rows"] == [1]
    # the next save completes: one folder of that iteration, with the new state
    assert save([1, 2]) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00003", "latest"]
    assert load_checkpoint(first, {"m": module}, {"m": opt})[0]["rows"] == [1, 2]
    for k in range(4, 7):  # only the newest two complete checkpoints are kept
        save_checkpoint(tmp_path, k, {"m": module}, {"m": opt}, {"rows": []}, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00005", "ckpt-00006", "latest"]


def test_a_warm_start_by_updates_is_cached_apart_from_one_by_minutes_and_ignores_the_clock():
    from rspo_kit.train.setup import warmstart_key

    def key(**policy):
        return warmstart_key(preset("tiny", env="webshop", **{f"policy__{k}": v for k, v in policy.items()}))

    assert key(sft_updates=1284, sft_minutes=2.0) == key(sft_updates=1284, sft_minutes=10.0)
    assert key(sft_updates=1284) != key(sft_updates=1000) != key()
    assert key(sft_minutes=2.0) != key(sft_minutes=10.0)
    with pytest.raises(ValueError, match="sft_updates"):
        preset("tiny", policy__sft_updates=0)


def test_levels_that_take_their_demonstrations_from_one_env_share_one_warm_start():
    from rspo_kit.train.setup import warmstart_key, warmstart_recipe

    def cfg(level, **policy):
        c = preset("chain-4k", algo="grpo").override("env.name", level)
        for k, v in policy.items():
            setattr(c.policy, k, v)
        return c

    shared = {warmstart_key(cfg(level)) for level in ("chain-4x2", "chain-4x2-cap10", "chain-4x2-cap8")}
    assert len(shared) == 1 and shared.pop().startswith("chain-4x2_")
    # without sft_env each level, and its cap, is a warm start of its own
    own = {warmstart_key(cfg(level, sft_env=None)) for level in ("chain-4x2", "chain-4x2-cap8", "chain-6x3")}
    assert len(own) == 3
    c = cfg("chain-6x3").override("env.max_steps", 10)
    assert warmstart_recipe(c)["env"] == "chain-4x2" and warmstart_recipe(c)["max_steps"] is None
    # label noise is part of the recipe; a clean start keeps the key it had without the field
    assert warmstart_key(cfg("chain-4x2", sft_label_noise=0.3)) != warmstart_key(cfg("chain-4x2"))
    assert "label_noise" not in warmstart_recipe(preset("tiny", env="webshop"))
    with pytest.raises(ValueError, match="sft_label_noise"):
        preset("chain-4k", algo="grpo", policy__sft_label_noise=1.0)


def test_a_warm_start_trains_on_one_thread_whatever_the_caller_set(tmp_path, monkeypatch):
    """SFT on two threads is not bit-reproducible: the cached warm start must not depend on the caller's."""
    import rspo_kit.policy.sft as sft_module
    import rspo_kit.train.setup as setup_module

    seen = []
    original = sft_module.train_sft

    def counting(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(sft_module, "train_sft", counting)
    monkeypatch.setattr(setup_module, "cache_dir", lambda: tmp_path / "cache")
    cfg = _smoke("dial", "grpo", "plain", tmp_path, policy__warmstart=True, policy__sft_updates=2)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _, report = setup_module.initial_policy(cfg, progress_bar=False)
        assert torch.get_num_threads() == 2  # the caller's threads again
    finally:
        torch.set_num_threads(before)
    assert seen == [sft_module.SFT_THREADS] == [1]
    assert (
        report["machine"]["torch_threads"] == 1 and report["machine"]["cpu"]
    )  # what the rounding depends on
    assert {"simd", "torch_cpu_capability"} <= set(report["machine"])
    from rspo_kit.policy.models import weights_digest

    cached, _ = setup_module.initial_policy(cfg, progress_bar=False)
    assert report["weights_sha256"] == weights_digest(cached.model)  # names the checkpoint it saved
    assert len(report["sft_losses"]) == 2
    assert report["cached"] is False and report["sft_updates"] == 2
    assert setup_module.initial_policy(cfg, progress_bar=False)[1]["cached"] is True


def test_a_saved_warm_start_installs_into_the_cache_and_runs_start_from_it(tmp_path, monkeypatch, capsys):
    """A committed warm start continues a result on another CPU, where the same recipe builds other weights."""
    import rspo_kit.train.setup as setup_module
    from rspo_kit.policy.models import weights_digest
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.sft import save_policy
    from rspo_kit.train.__main__ import main as train_main

    monkeypatch.setattr(setup_module, "cache_dir", lambda: tmp_path / "cache")
    cfg = _smoke("dial", "grpo", "plain", tmp_path, policy__warmstart=True, policy__sft_updates=2)

    def saved(name: str, shift: float) -> Path:  # a policy no SFT here would build
        policy = Policy.load(cfg.policy.preset, seed=0)
        with torch.no_grad():
            next(policy.model.parameters()).add_(shift)
        save_policy(policy, tmp_path / name / "policy")
        (tmp_path / name / "report.json").write_text('{"machine": {"cpu": "elsewhere"}}')
        return tmp_path / name / "policy"

    source = saved("committed", 0.5)
    recipe = setup_module.warmstart_recipe(cfg)
    (source.parent / "recipe.json").write_text(json.dumps(recipe | {"updates": 3}))
    with pytest.raises(ValueError, match=r"another recipe: updates 3 \(this run: 2\)"):
        setup_module.install_warmstart(cfg, source)  # weights of 3 SFT updates never go under the key of 2
    (source.parent / "recipe.json").write_text(json.dumps(recipe))
    done = setup_module.install_warmstart(cfg, source)
    expected = weights_digest(Policy.load(str(source)).model)
    assert done["installed"] is True and done["weights_sha256"] == expected
    policy, report = setup_module.initial_policy(cfg, progress_bar=False)
    assert (
        report["cached"] is True and weights_digest(policy.model) == expected
    )  # no SFT: the installed weights
    built = json.loads((Path(done["folder"]).parent / "report.json").read_text())
    assert built["installed_from"] == str(source) and built["machine"] == {"cpu": "elsewhere"}
    assert setup_module.install_warmstart(cfg, source)["installed"] is False  # held already: nothing to do
    with pytest.raises(ValueError, match="holds another warm start"):  # never replaces weights runs came from
        setup_module.install_warmstart(cfg, saved("other", -0.5))
    with pytest.raises(FileNotFoundError, match="not a saved policy"):
        setup_module.install_warmstart(cfg, tmp_path)
    cold = _smoke("dial", "grpo", "plain", tmp_path, policy__warmstart=False)
    with pytest.raises(ValueError, match="does not warm start"):
        setup_module.install_warmstart(cold, source)
    # the CLI fails before training, naming the problem
    args = ["--preset", "smoke", "--env", "dial", "policy.warmstart=true", "--warmstart-from", str(tmp_path)]
    assert train_main(args) == 2
    assert f"error: {tmp_path} is not a saved policy folder" in capsys.readouterr().err


# ------------------------------------------------------------- an explorer that differs from the actor
def _roles(trainer: Trainer) -> dict[int, str]:
    return {id(learner): role for role, learner in trainer.learners.items()}


def test_the_explorer_samples_at_its_own_temperature_and_each_update_at_its_batchs(tmp_path, monkeypatch):
    """B's rollout is sampled at ``swap.explorer_temperature`` (its stored behaviour log-probs are the
    candidates' softmax at that temperature); B's update scores D_A at A's temperature and D_B at B's;
    the actor's importance weights divide π_A at A's temperature by those behaviour log-probs."""
    import rspo_kit.train.trainer as trainer_module
    from rspo_kit.policy.step_scores import score_steps

    hot, cold = 3.0, 0.7  # the earlier design (group_mixing): B's update on D_A, then D_B, re-synced
    cfg = _smoke(
        "dial", "grpo", "group_mixing", tmp_path, swap__replay_filter="all", swap__explorer_temperature=hot
    )
    cfg.policy.temperature, cfg.swap.sync_every, cfg.train.iterations = cold, 2, 3
    trainer = _trainer(cfg)
    roles, calls, rechecked = _roles(trainer), [], []
    real_update = trainer_module.update

    def spy(learner, batch, algo, offpolicy, *, temperature, seed, reference):
        role = roles[id(learner)]
        replayed = [s for t, o in zip(batch.trajs, batch.offpolicy, strict=True) if o for s in t.steps]
        expected = None
        if replayed:  # min(π_A / π_B, c): π_A now, at A's temperature; π_B as B sampled it
            with torch.no_grad():
                now = torch.cat(score_steps(learner.policy, replayed, cold).logp)
            behaviour = torch.tensor([s.logprob for s in replayed])
            expected = float((now - behaviour).exp().clamp(max=offpolicy.is_clip).mean())
        metrics = real_update(
            learner, batch, algo, offpolicy, temperature=temperature, seed=seed, reference=reference
        )
        if expected is not None:
            assert role == "actor" and metrics["is/mean"] == pytest.approx(expected, rel=1e-5)
            rechecked.append(expected)
        calls.append((role, sorted({t.source for t in batch.trajs}), temperature))
        return metrics

    class Recheck:
        def on_rollout_end(self, event):
            if event.data["role"] != "explorer":
                return
            steps = [s for t in event.data["trajectories"] for s in t.steps]
            with torch.no_grad():  # the explorer as it sampled: its next update comes next iteration
                policy = trainer._learner("explorer").policy
                at_hot = torch.cat(score_steps(policy, steps, hot).logp)
                at_cold = torch.cat(score_steps(policy, steps, cold).logp)
            stored = torch.tensor([s.logprob for s in steps])
            torch.testing.assert_close(at_hot, stored, rtol=1e-4, atol=1e-5)
            assert not torch.allclose(at_cold, stored, rtol=1e-4, atol=1e-5)
            rechecked.append(len(steps))

    monkeypatch.setattr(trainer_module, "update", spy)
    trainer.callbacks.append(Recheck())
    trainer.run()
    assert calls == [
        ("explorer", ["actor"], cold),  # k=1: synced, B = A trains on D_A as A sampled it
        ("actor", ["actor", "replay"], cold),
        ("explorer", ["explorer"], hot),  # k=2: B's own D_B, sampled hot
        ("actor", ["actor", "replay"], cold),
        ("explorer", ["actor"], cold),  # k=3: synced again
        ("actor", ["actor", "replay"], cold),
    ]
    assert len(rechecked) == 6  # three explorer rollouts and three importance-weighted actor updates


def test_epsilon_mixture_is_the_softmax_mixed_with_the_uniform_as_a_loop_computes_it():
    from rspo_kit.policy.rollout import RolloutConfig, epsilon_mixture
    from rspo_kit.train.config import SwapConfig

    gen = torch.Generator().manual_seed(0)
    for k in (1, 2, 7):
        logp = (torch.randn(k, generator=gen) * 10).log_softmax(-1)
        for eps in (0.0, 0.1, 0.9):
            mixed = epsilon_mixture(logp, eps)
            slow = [math.log((1 - eps) * math.exp(v) + eps / k) for v in logp.tolist()]
            assert mixed.tolist() == pytest.approx(slow, rel=1e-5, abs=1e-6)
            assert float(mixed.exp().sum()) == pytest.approx(1.0, abs=1e-6)
    rare = epsilon_mixture(torch.tensor([0.0, -25.0, -25.0]), 0.3).exp()  # a choice at 1e-11 gets ε/K
    assert float(rare[1]) == pytest.approx(0.1, rel=1e-6)
    with pytest.raises(ValueError, match="epsilon must be in"):
        RolloutConfig(epsilon=1.0)
    with pytest.raises(ValueError, match="mixes uniform choices into sampling: it needs greedy=False"):
        RolloutConfig(epsilon=0.1, greedy=True)  # greedy would ignore it silently
    with pytest.raises(ValueError, match=r"SwapConfig.explorer_epsilon = -0.1: must be in \[0, 1\)"):
        SwapConfig(explorer_epsilon=-0.1)
    with pytest.raises(ValueError, match=r"explorer_epsilon = 0\.2 with policy\.mode = 'free'"):
        preset("smoke", swap="rspo", swap__explorer_epsilon=0.2, policy__mode="free").validate()


def test_an_epsilon_explorer_samples_from_the_mixture_and_keeps_its_log_probs(tmp_path):
    """With ``swap.explorer_epsilon`` B's stored behaviour log-probs are log((1 − ε)·π_B + ε/K) of the
    candidates at B's temperature, A's stay π_A's own, and every one of B's choices has at least ε/K.
    The paper's loop: B's dense-step rollouts and its collection both sample from the mixture."""
    from rspo_kit.policy.step_scores import score_steps

    eps = 0.5
    cfg = _smoke("dial", "grpo", True, tmp_path, swap__replay_filter="all", swap__explorer_epsilon=eps)
    cfg.train.iterations = 2
    trainer = _trainer(cfg)
    checked = {"actor": 0, "explorer": 0, "collection": 0}

    class Recheck:
        def on_rollout_end(self, event):
            role = event.data["role"]
            steps = [s for t in event.data["trajectories"] for s in t.steps]
            learner = trainer._learner("actor" if role == "actor" else "explorer")
            with torch.no_grad():
                pure = torch.cat(score_steps(learner.policy, steps, 1.0).logp)
            stored = torch.tensor([s.logprob for s in steps])
            if role != "actor":
                k = torch.tensor([float(len(s.candidates)) for s in steps])
                expected = ((1 - eps) * pure.exp() + eps / k).log()
                assert bool((stored >= (eps / k).log() - 1e-5).all())
            else:
                expected = pure
            torch.testing.assert_close(stored, expected, rtol=1e-4, atol=1e-5)
            checked[role] += len(steps)

    trainer.callbacks.append(Recheck())
    trainer.run()
    assert checked["actor"] > 0 and checked["explorer"] > 0 and checked["collection"] > 0


def test_the_explorers_temperature_leaves_a_run_without_the_swap_unchanged(tmp_path):
    runs = [
        _comparable(train(_smoke("dial", "grpo", "plain", tmp_path / str(t), **extra)).run_dir)
        for t, extra in enumerate([{}, {"swap__explorer_temperature": 3.0}])
    ]
    assert runs[0] == runs[1]


def test_a_persistent_explorer_syncs_once_and_then_trains_on_its_own_rollouts(tmp_path, monkeypatch):
    """group_mixing with ``sync_every=0`` and two dense updates an iteration: B <- A at the first
    iteration only, then both updates of every iteration run on B's own previous rollout."""
    import rspo_kit.train.trainer as trainer_module

    cfg = _smoke("dial", "grpo", "group_mixing", tmp_path, swap__sync_every=0, swap__explorer_updates=2)
    cfg.train.iterations = 3
    trainer = _trainer(cfg)
    roles, batches, synced = _roles(trainer), [], []
    real_update, real_sync = trainer_module.update, trainer.pair.sync_explorer

    def spy(learner, batch, *args, **kwargs):
        if roles[id(learner)] == "explorer":
            batches.append((trainer.iteration + 1, sorted({t.source for t in batch.trajs})))
        return real_update(learner, batch, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "update", spy)
    trainer.pair.sync_explorer = lambda: (synced.append(trainer.iteration + 1), real_sync())
    m = trainer.run().metrics
    assert synced == [1]
    assert batches == [(1, ["actor"])] * 2 + [(2, ["explorer"])] * 2 + [(3, ["explorer"])] * 2
    assert m["explorer/loss/policy"].iloc[1:].notna().all()
    assert _changed(_params(trainer, "actor"), _params(trainer, "explorer"))


def _persistent(tmp_path, iterations: int, **extra) -> RunConfig:
    cfg = _smoke(
        "dial", "gigpo", "group_mixing", tmp_path, swap__sync_every=0, swap__explorer_temperature=2.0, **extra
    )
    cfg.train.iterations = iterations
    return cfg


def test_a_persistent_explorer_resumes_exactly(tmp_path):
    """B is never re-derived from A: a resumed run must restore it (weights, optimizer, its last D_B)."""
    from rspo_kit.train import resumable
    from rspo_kit.train.setup import trained_actor

    full = _persistent(tmp_path / "full", 4, swap__replay_filter="all")
    train(full)
    part = _persistent(tmp_path / "part", 2, swap__replay_filter="all")
    train(part)
    longer = _persistent(tmp_path / "part", 4, swap__replay_filter="all")
    assert resumable(longer) == Path(part.train.run_dir)
    train(longer, resume=resumable(longer))
    a, b = _comparable(Path(full.train.run_dir)), _comparable(Path(part.train.run_dir))
    assert a == b and len(a) == 5 and a[-1]["explorer/loss/policy"] == b[-1]["explorer/loss/policy"]
    assert not _changed(
        list(trained_actor(full.train.run_dir).model.parameters()),
        list(trained_actor(part.train.run_dir).model.parameters()),
    )


# ------------------------------------------------------------------------- choice-mode scoring
def _uniform_tiny(choice_score: str):
    """The tiny preset with its output head zeroed: every token equally likely after any prompt."""
    from dataclasses import replace

    from rspo_kit.policy.rollout import Policy

    policy = Policy.load("tiny", seed=0)
    with torch.no_grad():
        policy.model.get_output_embeddings().weight.zero_()
    return replace(policy, choice_score=choice_score)


def test_a_mean_score_does_not_fall_with_a_candidates_length():
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.scoring import candidate_logprobs

    policy = _uniform_tiny("mean")
    lengths = (1, 2, 4, 8)
    cands = [[[11 + n] * n for n in lengths]]
    pad, log_v = policy.tokenizer.pad_token_id, math.log(policy.model.config.vocab_size)
    summed = candidate_logprobs(policy.model, [[5, 6, 7]], cands, pad, score="sum")[0]
    mean = candidate_logprobs(policy.model, [[5, 6, 7]], cands, pad, score="mean")[0]
    assert summed.tolist() == pytest.approx([-n * log_v for n in lengths], rel=1e-5)  # longer: less likely
    assert mean.tolist() == pytest.approx([-log_v] * len(lengths), rel=1e-5)  # equally likely tokens: equal
    # on a trained-from-nothing model too: the mean is the sum over the candidate's length
    trained = Policy.load("tiny", seed=0)
    summed = candidate_logprobs(trained.model, [[5, 6, 7]], cands, pad, score="sum")[0]
    mean = candidate_logprobs(trained.model, [[5, 6, 7]], cands, pad, score="mean")[0]
    torch.testing.assert_close(mean, summed / torch.tensor(lengths, dtype=summed.dtype))


@pytest.mark.parametrize("choice_score", ["sum", "mean"])
def test_the_update_scores_candidates_as_the_rollout_sampled_them(choice_score, tmp_path):
    """The policy gradient's log-softmax over candidates is the one the rollout sampled from: a run's
    actor and explorer score as ``policy.choice_score`` says, and a stored step's log-prob is what
    ``score_steps`` gives it again (and not what the other scoring gives)."""
    from dataclasses import replace

    from rspo_kit.policy.step_scores import score_steps
    from rspo_kit.train.setup import trained_actor

    cfg = _smoke("dial", "grpo", True, tmp_path, policy__choice_score=choice_score, train__iterations=1)
    collected = []

    class Collection:
        def on_rollout_end(self, event):
            if event.data["role"] == "collection":
                collected.extend(event.data["trajectories"])

    trainer = _trainer(cfg, callbacks=[Collection()])
    assert {trainer.pair.policy(r).choice_score for r in ("actor", "explorer")} == {choice_score}
    trainer.run()
    assert trained_actor(cfg.train.run_dir).choice_score == choice_score
    steps = [s for t in collected for s in t.steps]  # B's collection: B takes no update after it
    stored = torch.tensor([s.logprob for s in steps])
    explorer = trainer._learner("explorer").policy
    other = replace(explorer, choice_score="mean" if choice_score == "sum" else "sum")
    with torch.no_grad():
        again = torch.cat(score_steps(explorer, steps, cfg.policy.temperature).logp)
        differently = torch.cat(score_steps(other, steps, cfg.policy.temperature).logp)
    torch.testing.assert_close(again, stored, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(differently, stored, rtol=1e-4, atol=1e-5)


def test_a_persistent_control_keeps_the_starting_policy_as_its_explorer(tmp_path):
    """group_mixing's control (no dense update) with ``sync_every=0``: B <- A once, so B stays the start."""
    cfg = _smoke(
        "dial",
        "grpo",
        "group_mixing",
        tmp_path,
        swap__sync_every=0,
        swap__replay_filter="all",
        swap__explorer_updates=0,
    )
    trainer = _trainer(cfg)
    start = _params(trainer, "actor")
    m = trainer.run().metrics
    assert m["explorer_rollout/env_steps"].iloc[1:].gt(0).all() and "explorer/loss/policy" not in m
    assert not _changed(start, _params(trainer, "explorer")) and _changed(start, _params(trainer, "actor"))
