"""Training under faults: the guard on non-finite values, resume of damaged runs, strict run settings,
checkpoint digests and run folders that never collide. Each test runs the real code at toy budgets."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import pytest
import torch
from lock_env import register_lock
from safetensors.torch import load_file, save_file
from trainer_runs import trained_keeping_last_update

import rspo_kit.train.trainer as trainer_module
from rspo_kit.train import RunConfig, Trainer, initial_policy, preset, train
from rspo_kit.train.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, save_checkpoint
from rspo_kit.train.resume import stored_config
from rspo_kit.train.setup import trained_actor
from rspo_kit.train.update import update

register_lock()


def _smoke(tmp_path: Path, name: str = "run", algo: str = "grpo", **overrides) -> RunConfig:
    cfg = preset("smoke", env="dial", algo=algo, seed=0, **overrides)
    cfg.train.run_dir = str(tmp_path / name)
    cfg.train.threads = 1
    return cfg


class Iterations:
    """Records the iteration of every actor rollout: where a (resumed) run trained."""

    def __init__(self):
        self.seen: list[int] = []

    def on_rollout_end(self, event):
        if event.data["role"] == "actor":
            self.seen.append(event.iteration)


def _rows(run_dir: Path) -> list[int]:
    return [json.loads(line)["iteration"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _all_finite(folder: Path) -> bool:
    return all(torch.isfinite(t).all() for t in load_file(str(folder / "tensors.safetensors")).values())


# ------------------------------------------------------------------------------------ the NaN guard
def test_a_non_finite_gradient_stops_the_run_before_its_step_and_resume_continues_from_the_last_good_one(
    tmp_path,
):
    """The issue's recipe: a huge lr and one minibatch; iteration 2's gradient norm is NaN."""
    cfg = _smoke(tmp_path, algo__lr=1e3, algo__minibatch_steps=100000, train__iterations=4)
    run_dir = Path(cfg.train.run_dir)
    with pytest.raises(RuntimeError) as err:
        train(cfg)
    message = str(err.value)
    assert "iteration 2" in message and "gradient" in message and "ckpt-00001" in message
    assert "--resume" in message
    assert (run_dir / "latest").read_text().strip() == "ckpt-00001"
    assert not (run_dir / "ckpt-00002").exists()
    assert _all_finite(run_dir / "ckpt-00001")
    assert _rows(run_dir) == [0, 1]  # no row of the failed iteration is logged as a result

    seen = Iterations()
    with pytest.raises(RuntimeError, match="iteration 2"):
        train(resume=run_dir, callbacks=[seen])
    assert seen.seen == [2]  # continued from ckpt-00001, not from the start
    assert _rows(run_dir) == [0, 1]


def _one_iteration(tmp_path: Path, algo: str):
    """A learner after one iteration and the batch it trained on."""
    cfg = _smoke(tmp_path, algo=algo, train__iterations=1)
    trainer, last = trained_keeping_last_update(cfg)
    return cfg, trainer._learner("actor"), last["batch"]


def _snapshot(learner) -> list[torch.Tensor]:
    return [p.detach().clone() for p in learner.params]


def test_a_non_finite_gradient_norm_is_never_stepped(tmp_path):
    cfg, learner, batch = _one_iteration(tmp_path, "grpo")
    before = _snapshot(learner)
    moments = {k: {n: v.clone() for n, v in s.items()} for k, s in learner.optimizer.state.items()}
    hooks = [p.register_hook(lambda g: g * math.nan) for p in learner.params]
    with pytest.raises(FloatingPointError, match=r"gradient norm .*nan.* not taken"):
        update(learner, batch, cfg.algo, cfg.swap.offpolicy, temperature=cfg.policy.temperature)
    for h in hooks:
        h.remove()
    assert all(torch.equal(a, b) for a, b in zip(before, _snapshot(learner), strict=True))
    for key, slots in learner.optimizer.state.items():
        assert all(torch.equal(v, moments[key][n]) for n, v in slots.items())


def test_non_finite_parameters_after_a_step_stop_the_update(tmp_path, monkeypatch):
    cfg, learner, batch = _one_iteration(tmp_path, "grpo")
    step = learner.optimizer.step

    def overflowing_step(*args, **kwargs):
        out = step(*args, **kwargs)
        with torch.no_grad():
            learner.params[0].view(-1)[0] = math.inf
        return out

    monkeypatch.setattr(learner.optimizer, "step", overflowing_step)
    with pytest.raises(FloatingPointError, match="non-finite parameters"):
        update(learner, batch, cfg.algo, cfg.swap.offpolicy, temperature=cfg.policy.temperature)


def test_non_finite_critic_values_stop_the_update(tmp_path):
    cfg, learner, batch = _one_iteration(tmp_path, "ppo")
    with torch.no_grad():
        learner.value_head.net[-1].bias.fill_(math.nan)
    with pytest.raises(FloatingPointError, match="non-finite critic values"):
        update(learner, batch, cfg.algo, cfg.swap.offpolicy, temperature=cfg.policy.temperature)


def test_no_checkpoint_is_written_from_a_non_finite_state(tmp_path):
    module = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    good = save_checkpoint(tmp_path, 1, {"m": module}, {"m": opt}, {"rows": []}, {})
    with torch.no_grad():
        module.weight[0, 1] = math.nan
    with pytest.raises(FloatingPointError, match=r"module\.m\.weight"):
        save_checkpoint(tmp_path, 2, {"m": module}, {"m": opt}, {"rows": []}, {})
    assert latest_checkpoint(tmp_path) == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00001", "latest"]


# ------------------------------------------------------------------------------------------- resume
@pytest.fixture
def finished_run(tmp_path) -> Path:
    """A smoke run of two iterations, checkpointed at both."""
    cfg = _smoke(tmp_path, train__iterations=2)
    train(cfg)
    run_dir = Path(cfg.train.run_dir)
    assert sorted(p.name for p in run_dir.glob("ckpt-*")) == ["ckpt-00001", "ckpt-00002"]
    return run_dir


def _longer(run_dir: Path, iterations: int) -> RunConfig:
    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    cfg.train.iterations = iterations
    return cfg


@pytest.mark.parametrize("damage", ["missing", "garbage", "names a folder that is not there"])
def test_a_damaged_latest_resumes_from_the_newest_checkpoint_and_says_so(finished_run, damage):
    latest = finished_run / "latest"
    if damage == "missing":
        latest.unlink()
    elif damage == "garbage":
        latest.write_bytes(b"\xff\x00ckpt")
    else:
        latest.write_text("ckpt-00007")
    seen = Iterations()
    with pytest.warns(UserWarning, match=r"latest.*ckpt-00002"):
        train(_longer(finished_run, 3), resume=finished_run, callbacks=[seen])
    assert seen.seen == [3]
    assert _rows(finished_run) == [0, 1, 2, 3]


def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(finished_run):
    tensors = finished_run / "ckpt-00002" / "tensors.safetensors"
    tensors.write_bytes(tensors.read_bytes()[:-100])  # truncated
    seen = Iterations()
    with pytest.warns(UserWarning, match=r"ckpt-00002.*tensors\.safetensors.*ckpt-00001"):
        train(_longer(finished_run, 3), resume=finished_run, callbacks=[seen])
    assert seen.seen == [2, 3]
    assert _rows(finished_run) == [0, 1, 2, 3]


def test_resuming_a_folder_without_a_loadable_checkpoint_is_an_error_naming_it(finished_run):
    for folder in finished_run.glob("ckpt-*"):
        (folder / "state.json").write_text("{")
    with pytest.raises(CheckpointError, match=re.escape(str(finished_run))):
        train(resume=finished_run)
    empty = finished_run.parent / "empty"
    empty.mkdir()
    (empty / "config.json").write_text((finished_run / "config.json").read_text())
    with pytest.raises(CheckpointError, match=rf"{re.escape(str(empty))}.*no checkpoint"):
        train(resume=empty)


def test_resume_overrides_apply_the_safe_fields_and_refuse_the_others_by_name(finished_run, capsys):
    from rspo_kit.train.__main__ import main

    assert main(["--resume", str(finished_run), "algo.lr=1e-2", "swap.replay_ratio=1"]) == 2
    err = capsys.readouterr().err
    assert "algo.lr" in err and "swap.replay_ratio" in err and "train.iterations" in err
    assert main(["--resume", str(finished_run), "--seed", "3"]) == 2
    assert "--seed" in capsys.readouterr().err
    assert _rows(finished_run) == [0, 1, 2]  # nothing ran

    assert main(["--resume", str(finished_run), "train.iterations=3", "train.eval_n=3"]) == 0
    assert _rows(finished_run) == [0, 1, 2, 3]
    stored = json.loads((finished_run / "config.json").read_text())
    assert (stored["train"]["iterations"], stored["train"]["eval_n"]) == (3, 3)
    # a config passed to train() that differs in what the run computes is refused too, not ignored
    other = _longer(finished_run, 4)
    other.algo.lr = 1e-2
    with pytest.raises(ValueError, match=r"algo\.lr"):
        train(other, resume=finished_run)


def test_an_env_step_budget_can_be_raised_on_resume(finished_run):
    cfg = _longer(finished_run, 100)
    cfg.train.max_env_steps = (
        int(
            json.loads((finished_run / "metrics.jsonl").read_text().splitlines()[-1])[
                "rollout/cumulative_env_steps"
            ]
        )
        + 1
    )
    seen = Iterations()
    train(cfg, resume=finished_run, callbacks=[seen])
    assert seen.seen == [3]  # one more iteration spends the budget


# -------------------------------------------------------------------------------- strict settings
@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("algo.lr", "inf", "finite"),
        ("algo.clip_high", "-1", "> 0"),
        ("algo.max_grad_norm", "-1", "> 0"),
        ("algo.value_lr", "-5", "> 0"),
        ("algo.kl_coef", "-1", ">= 0"),
        ("algo.omega", "nan", "finite"),
        ("swap.replay_ratio", "inf", "finite"),
        ("policy.lora_rank", "-3", ">= 1"),
        ("policy.max_new_tokens", "-1", ">= 1"),
        ("env.engine", "bogus", "'native', 'alfworld'"),
        ("algo.entropy_coef", "-0.1", ">= 0"),
        ("algo.value_clip", "0", "None or > 0"),
        ("policy.sft_lr", "0", "> 0"),
        ("train.threads", "0", ">= 1"),
        ("train.seed", "-1", ">= 0"),
    ],
)
def test_out_of_range_settings_are_refused_naming_the_field_and_its_range(key, value, allowed):
    section, name = key.split(".")
    with pytest.raises(ValueError) as err:
        preset("tiny", **{f"{section}__{name}": value})
    assert f".{name} = " in str(err.value) and allowed in str(err.value)
    from rspo_kit.train.__main__ import config, parser

    with pytest.raises(ValueError, match=rf"\.{name} = "):
        config(parser().parse_intermixed_args([f"{key}={value}"]))


@pytest.mark.parametrize("text, value", [("TRUE", True), ("no", False), ("1", True), ("0", False)])
def test_booleans_parse_from_the_six_words(text, value):
    assert RunConfig().override("policy.warmstart", text).policy.warmstart is value


@pytest.mark.parametrize("text", ["ture", "2", "on", "", "false!"])
def test_any_other_boolean_text_is_an_error_naming_the_field(text):
    with pytest.raises(ValueError, match=r"policy\.warmstart = .*true or false"):
        RunConfig().override("policy.warmstart", text)


@pytest.mark.parametrize(
    "section, values, words",
    [
        ("policy", {"warmstart": "false"}, ["PolicyConfig.warmstart = 'false'", "true or false"]),
        ("train", {"iterations": 2.5}, ["TrainConfig.iterations = 2.5", "an integer"]),
        ("train", {"seed": 1.5}, ["TrainConfig.seed = 1.5", "an integer"]),
        ("algo", {"lr": "3e-4"}, ["AlgoConfig.lr = '3e-4'", "a finite number"]),
        ("algo", {"lr": True}, ["AlgoConfig.lr = True", "a finite number"]),
        ("env", {"max_steps": [4]}, ["EnvConfig.max_steps = [4]", "an integer or None"]),
    ],
)
def test_wrongly_typed_fields_are_refused_wherever_they_come_from(section, values, words):
    """config.json (from_dict), a dataclass built in code, an override with a value that is not text."""
    with pytest.raises(ValueError) as err:
        RunConfig.from_dict({section: values})
    for word in words:
        assert word in str(err.value)
    key, value = next(iter(values.items()))
    if not isinstance(value, str):
        with pytest.raises(ValueError, match=rf"{section}\.{key} = "):
            RunConfig().override(f"{section}.{key}", value)


NOTEBOOK = {"PRESET": "smoke", "ENV": "dial", "ALGO": "grpo", "VARIANT": "plain", "SEED": 0}
NOTEBOOK |= {"ITERATIONS": None, "THREADS": None, "RUN_DIR": "", "INTERACTIVE": False, "OVERRIDES": {}}


@pytest.mark.parametrize(
    "given, words",
    [
        ({"ITERATIONS": 2.5}, ["ITERATIONS = 2.5", "train.iterations", "an integer"]),
        ({"SEED": 1.5}, ["SEED = 1.5", "an integer"]),
        ({"THREADS": "two"}, ["THREADS = 'two'", "an integer"]),
        ({"INTERACTIVE": "ture"}, ["INTERACTIVE = 'ture'", "true or false"]),
        ({"OVERRIDES": {"algo.lr": "fast"}}, ["algo.lr = 'fast'", "a number"]),
        ({"OVERRIDES": {"algo.lr": [3e-4]}}, ["algo.lr = [0.0003]", "a number"]),
        ({"OVERRIDES": "{not json"}, ["OVERRIDES", "JSON"]),
        ({"OVERRIDES": ["algo.lr"]}, ["OVERRIDES", "dict"]),
        ({"ITERATIONS": -1}, ["ITERATIONS = -1", ">= 0"]),
    ],
)
def test_notebook_parameters_are_checked_naming_the_parameter(given, words):
    from rspo_kit.train.presets import from_parameters

    with pytest.raises(ValueError) as err:
        from_parameters({**NOTEBOOK, **given})
    for word in words:
        assert word in str(err.value)


def test_notebook_parameters_build_the_config_the_notebook_trains():
    from rspo_kit.train.presets import from_parameters

    cfg = from_parameters({**NOTEBOOK, "ITERATIONS": 3, "SEED": 2, "OVERRIDES": '{"algo.lr": "2e-4"}'})
    assert (cfg.train.iterations, cfg.train.seed, cfg.algo.lr, cfg.train.progress_bar) == (3, 2, 2e-4, False)
    assert (cfg.env.name, cfg.algo.name, cfg.train.run_dir) == ("dial", "grpo", None)
    notebook = json.loads((Path(__file__).parents[1] / "notebooks" / "04_training.ipynb").read_text())
    assert any("from_parameters(" in "".join(cell["source"]) for cell in notebook["cells"])


# --------------------------------------------------------------------------------- checkpoint digest
def _saved(tmp_path: Path) -> tuple[Path, torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(module.parameters(), lr=0.1)
    module(torch.randn(3, 8)).sum().backward()
    opt.step()
    return save_checkpoint(tmp_path, 1, {"m": module}, {"m": opt}, {"rows": []}, {}), module, opt


def test_a_checkpoint_with_flipped_bits_is_refused_naming_the_tensor(tmp_path):
    folder, module, opt = _saved(tmp_path)
    path = folder / "tensors.safetensors"
    data = bytearray(path.read_bytes())
    header = struct.unpack("<Q", data[:8])[0]
    offsets = json.loads(data[8 : 8 + header])["module.m.0.weight"]["data_offsets"]
    data[8 + header + offsets[0] + 3] ^= 0x40  # one exponent bit of the first weight
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"tensors\.safetensors: tensor module\.m\.0\.weight .*digest"):
        load_checkpoint(folder, {"m": module}, {"m": opt})


def test_a_missing_or_extra_tensor_is_an_error_naming_it(tmp_path):
    folder, module, opt = _saved(tmp_path)
    bigger = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2), torch.nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match=r"module\.m\.2\.weight.*missing"):
        load_checkpoint(folder, {"m": bigger}, {})
    smaller = torch.nn.Sequential(torch.nn.Linear(8, 8))
    with pytest.raises(CheckpointError, match=r"module\.m\.1\.bias.*not a tensor of"):
        load_checkpoint(folder, {"m": smaller}, {})
    # a tensor dropped from the file that its record lists
    path = folder / "tensors.safetensors"
    tensors = load_file(str(path))
    del tensors["module.m.1.bias"]
    save_file(tensors, str(path))
    with pytest.raises(
        CheckpointError,
        match=r"tensors\.safetensors: module\.m\.1\.bias: recorded in .*state\.json but missing",
    ):
        load_checkpoint(folder, {"m": module}, {"m": opt})


def test_an_intact_checkpoint_loads_bit_for_bit(tmp_path):
    folder, module, opt = _saved(tmp_path)
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    load_checkpoint(folder, {"m": fresh}, {"m": fresh_opt})
    for a, b in zip(module.state_dict().values(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    for slots, fresh_slots in zip(opt.state.values(), fresh_opt.state.values(), strict=True):
        assert all(torch.equal(v, fresh_slots[n]) for n, v in slots.items())


def test_a_truncated_tensors_file_is_a_record_error_naming_it(tmp_path):
    from rspo_kit.records import RecordError

    folder, module, opt = _saved(tmp_path)
    path = folder / "tensors.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}: truncated or damaged safetensors"):
        load_checkpoint(folder, {"m": module}, {"m": opt})


def test_a_state_json_missing_a_key_is_an_error_naming_the_file_and_the_key(tmp_path):
    from rspo_kit.records import RecordError

    folder, module, opt = _saved(tmp_path)
    path = folder / "state.json"
    with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}: missing key 'iteration'"):
        load_checkpoint(folder, {"m": module}, {"m": opt}, state_keys=("iteration", "rows"))
    state = json.loads(path.read_text())
    del state["optimizers"]
    path.write_text(json.dumps(state))
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: missing key 'optimizers'"):
        load_checkpoint(folder, {"m": module}, {"m": opt})


def test_a_truncated_replay_is_an_error_naming_it_and_no_module_changes(tmp_path):
    import gzip

    from rspo_kit.records import RecordError

    folder = _saved(tmp_path)[0]
    replay = folder / "replay.json.gz"
    with gzip.open(replay, "wt") as f:
        json.dump([{"task_id": str(i), "steps": list(range(50))} for i in range(200)], f)
    replay.write_bytes(replay.read_bytes()[:200])
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    with pytest.raises(RecordError, match=rf"^{re.escape(str(replay))}: truncated or damaged gzip"):
        load_checkpoint(folder, {"m": fresh}, {})
    assert all(torch.equal(before[k], v) for k, v in fresh.state_dict().items())


def test_a_config_json_with_an_unknown_field_is_an_error_naming_it(tmp_path):
    from rspo_kit.records import RecordError

    run_dir = tmp_path / "run"
    _saved(run_dir)
    config = preset("smoke", env="dial", algo="grpo").to_dict()
    config["algo"]["learning_rat"] = 1e-5
    path = run_dir / "config.json"
    path.write_text(json.dumps(config))
    for read in (trained_actor, stored_config):
        with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}: .*'learning_rat'"):
            read(run_dir)
    with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}: .*'learning_rat'"):
        train(resume=run_dir)


# ------------------------------------------------------------------------------------- run folders
def test_runs_of_one_config_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(trainer_module.time, "strftime", lambda *_: "20260101-000000")
    cfg = preset("smoke", env="dial", algo="grpo")
    folders = [trainer_module._default_run_dir(cfg) for _ in range(3)]
    assert len(set(folders)) == 3 and all(f.is_dir() for f in folders)
    assert folders[0].name == "20260101-000000_dial_grpo_plain_s0"
    assert all(f.name.startswith(folders[0].name) for f in folders)
    policy, _ = initial_policy(cfg, progress_bar=False)
    first, second = Trainer(cfg, policy), Trainer(cfg, policy)
    assert first.run_dir != second.run_dir and first.run_dir.parent == second.run_dir.parent


def test_the_cli_reports_a_stopped_run_in_one_line(tmp_path, capsys):
    from rspo_kit.train.__main__ import main

    argv = [
        "--preset",
        "smoke",
        "--env",
        "dial",
        "--algo",
        "grpo",
        "algo.lr=1e3",
        "algo.minibatch_steps=100000",
    ]
    argv += ["train.iterations=3", "train.threads=1", f"train.run_dir={tmp_path / 'run'}"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: training stopped at iteration 2: non-finite gradient norm")
    assert "Traceback" not in "\n".join(err)


def test_an_optional_mode_takes_none_and_its_values_only():
    cfg = RunConfig().override("env.engine", "alfworld").validate()
    assert cfg.override("env.engine", "None").validate().env.engine is None
    with pytest.raises(ValueError, match=r"EnvConfig\.engine = 'fast' is not allowed; choose one of"):
        cfg.override("env.engine", "fast").validate()


def test_the_train_package_exports_what_callers_catch_and_build_from():
    """``from rspo_kit.train import ...`` for the notebook builder and the two errors a caller handles;
    the package loads them on first use, so importing it costs neither torch nor the trainer."""
    import subprocess
    import sys

    import rspo_kit.train as package
    from rspo_kit.train.checkpoint import CheckpointError as checkpoint_error
    from rspo_kit.train.presets import from_parameters as builder
    from rspo_kit.train.trainer import TrainingStopped as stopped

    assert (package.from_parameters, package.TrainingStopped, package.CheckpointError) == (
        builder,
        stopped,
        checkpoint_error,
    )
    assert {"from_parameters", "TrainingStopped", "CheckpointError"} <= set(package.__all__) & set(
        dir(package)
    )
    probe = "import sys, rspo_kit.train; print('torch' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
        == "False"
    )
