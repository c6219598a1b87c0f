"""The hard regime on ALFWorld: a warm start that never saw some task kinds, RL and evaluation on all of
them, and the report's split of every final evaluation into the kinds left out and the kinds shown."""

from __future__ import annotations

import json

import pytest

from rspo_kit.train import preset
from rspo_kit.train.config import PolicyConfig, RunConfig

LEFT_OUT = ("look_at_obj_in_light", "pick_two_obj_and_place")


# ------------------------------------------------------------------------------------------ config
def test_the_kinds_to_leave_out_are_a_tuple_of_names_from_code_text_and_json():
    cfg = preset("tiny", policy__sft_exclude_kinds="look_at_obj_in_light, pick_two_obj_and_place")
    assert cfg.policy.sft_exclude_kinds == LEFT_OUT
    assert preset("tiny", policy__sft_exclude_kinds=list(LEFT_OUT)).policy.sft_exclude_kinds == LEFT_OUT
    assert preset("tiny", policy__sft_exclude_kinds="").policy.sft_exclude_kinds == ()
    stored = json.loads(json.dumps(cfg.to_dict()))  # config.json holds a list
    assert RunConfig.from_dict(stored).policy.sft_exclude_kinds == LEFT_OUT
    with pytest.raises(
        ValueError, match=r"PolicyConfig.sft_exclude_kinds = 'look': must be a tuple of names"
    ):
        PolicyConfig(sft_exclude_kinds="look")
    with pytest.raises(ValueError, match=r"sft_exclude_kinds = .*must be distinct kinds"):
        PolicyConfig(sft_exclude_kinds=("a", "a"))
    with pytest.raises(ValueError, match=r"policy.sft_exclude_kinds = 3: must be names, comma-separated"):
        RunConfig().override("policy.sft_exclude_kinds", 3)


def test_leaving_kinds_out_keys_its_own_warm_start_and_leaves_every_other_key_as_it_was():
    from rspo_kit.train.setup import warmstart_key, warmstart_recipe

    plain = preset("alfworld-40k", policy__warmstart_from=None)
    assert "exclude_kinds" not in warmstart_recipe(plain)
    hard = preset("alfworld-40k", policy__warmstart_from=None, policy__sft_exclude_kinds=LEFT_OUT)
    assert warmstart_recipe(hard)["exclude_kinds"] == sorted(LEFT_OUT)
    assert warmstart_key(hard) != warmstart_key(plain)
    swapped = preset("alfworld-40k", policy__warmstart_from=None, policy__sft_exclude_kinds=LEFT_OUT[::-1])
    assert warmstart_key(swapped) == warmstart_key(hard)  # a set of kinds: the order names no other start


# ------------------------------------------------------------------------------------ demonstrations
def test_the_demonstrations_leave_the_kinds_out_and_keep_their_number():
    from rspo_kit.envs.registry import list_tasks
    from rspo_kit.policy.sft import demonstration_tasks

    assert demonstration_tasks("alfworld", 40) == list_tasks("alfworld", "train", n=40)
    tasks = demonstration_tasks("alfworld", 40, LEFT_OUT)
    assert len(tasks) == 40 and len({t.id for t in tasks}) == 40
    assert {t.kind for t in tasks} == {t.kind for t in list_tasks("alfworld", "train")} - set(LEFT_OUT)
    with pytest.raises(
        ValueError, match="no task kind 'pick_three' in alfworld; its kinds: look_at_obj_in_light"
    ):
        demonstration_tasks("alfworld", 40, ["pick_three"])
    every = sorted({t.kind for t in list_tasks("alfworld", "train")})
    with pytest.raises(ValueError, match="leaves no train task of alfworld"):
        demonstration_tasks("alfworld", 40, every)


def test_a_run_names_the_field_when_a_kind_is_wrong_before_any_warm_start(tmp_path, monkeypatch):
    import rspo_kit.train.setup as setup_module

    monkeypatch.setattr(setup_module, "cache_dir", lambda: tmp_path / "cache")
    cfg = preset("alfworld-40k", policy__sft_exclude_kinds=("look_at_obj_in_light", "pick_three"))
    with pytest.raises(ValueError, match=r"policy.sft_exclude_kinds = .*no task kind 'pick_three'"):
        setup_module.initial_policy(cfg, progress_bar=False)
    assert not (tmp_path / "cache").exists()  # nothing installed, nothing trained


def test_the_warm_start_learns_from_the_other_kinds_only(tmp_path, monkeypatch):
    import rspo_kit.policy.sft as sft_module
    import rspo_kit.train.setup as setup_module

    monkeypatch.setattr(setup_module, "cache_dir", lambda: tmp_path / "cache")
    seen = []
    real = sft_module.warm_start

    def recorded(policy, runner, tasks, cfg, **kwargs):
        seen.extend(tasks)
        return real(policy, runner, tasks, cfg, **kwargs)

    monkeypatch.setattr(sft_module, "warm_start", recorded)
    cfg = preset(
        "smoke",
        env="alfworld",
        policy__warmstart=True,
        policy__sft_updates=1,
        policy__sft_demo_tasks=8,
        policy__sft_exclude_kinds=LEFT_OUT,
    )
    _, report = setup_module.initial_policy(cfg, progress_bar=False)
    assert report["cached"] is False and report["sft_updates"] == 1
    assert len(seen) == 8 and not {t.kind for t in seen} & set(LEFT_OUT)
    assert len({t.kind for t in seen}) == 4


def test_the_warmstart_cli_refuses_a_kind_the_env_lacks(capsys):
    from rspo_kit.policy.warmstart import main

    with pytest.raises(SystemExit) as stop:
        main(["--env", "alfworld", "--exclude-kinds", "look_at_obj_in_light,pick_three"])
    assert stop.value.code == 2
    assert "--exclude-kinds: no task kind 'pick_three' in alfworld" in capsys.readouterr().err
