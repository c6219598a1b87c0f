"""What a run checks of its configuration before anything is built (a warm start takes minutes).

``checked(cfg)`` validates the fields, imports the user's env module, resolves ``reward.process =
"auto"`` (so that config.json records the reward that ran), and fails now, naming the field, on an
unknown evaluation split, on tuning on ``valid`` with train tasks from it, and on a process reward the
run trains on that the env lacks or that would pay nothing.
"""

from __future__ import annotations

import torch

from rspo_kit.envs.registry import list_tasks, make_env, valid_start
from rspo_kit.rewards.process import GENERIC_REWARD, ProcessReward, ProgressPotential
from rspo_kit.rewards.progress_model import PROCESS_NAME as PROGRESS_MODEL
from rspo_kit.rewards.progress_model import auto_process_reward, progress_model_folder
from rspo_kit.train.config import RunConfig, process_reward_use
from rspo_kit.train.rewards import reward_model
from rspo_kit.train.setup import load_run_env


def _check_valid_held_out(cfg: RunConfig) -> None:
    """Evaluating on ``valid`` is tuning on held-out train tasks: no train task the run learns from may be in it."""
    if "valid" not in (cfg.train.eval_split, *cfg.train.final_eval_splits):
        return
    start = valid_start(cfg.env.name)
    used = {"env.train_tasks": cfg.env.train_tasks}
    if cfg.policy.warmstart:
        used["policy.sft_demo_tasks"] = cfg.policy.sft_demo_tasks
    for name, n in used.items():
        if n > start:
            raise ValueError(
                f"{name}={n} overlaps the valid split (train tasks {start} onwards of {cfg.env.name}); "
                f"use at most {start} or evaluate on another split"
            )


def _check_splits(cfg: RunConfig) -> None:
    """Unknown evaluation splits fail here, not after hours of training."""
    for name, splits in (
        ("eval_split", [cfg.train.eval_split]),
        ("final_eval_split", cfg.train.final_eval_splits),
    ):
        for split in splits:
            try:
                tasks = list_tasks(cfg.env.name, split)
            except ValueError as err:
                raise ValueError(f"train.{name}: {err}") from None
            if not tasks:
                raise ValueError(f"train.{name}: {cfg.env.name} has no tasks in split {split!r}")


def _generic_terms(reward: ProcessReward) -> list[ProgressPotential]:
    """The generic ``progress`` rewards in ``reward`` (itself, or terms of a weighted sum)."""
    terms = [reward, *(term for _, term in getattr(reward, "terms", ()))]
    return [term for term in terms if isinstance(term, ProgressPotential)]


def _check_process_reward(cfg: RunConfig) -> None:
    """A run that trains on a process reward (RSPO's explorer, the process and mix baselines) finds it
    now, not after a warm start: a missing one is an error naming the env, the reward, what the env
    has and the line that adds one; the generic ``progress`` reward is checked against the progress
    of one expert step (an env whose progress holds no numbers would pay it 0 forever)."""
    use = process_reward_use(cfg)
    if cfg.reward.process == PROGRESS_MODEL:  # its weights are found now; they register at start
        progress_model_folder(cfg.env.name, cfg.reward.progress_model)
        return
    if use is None or cfg.reward.process == "learned":  # a learned PRM registers from its folder at start
        return
    try:
        reward = reward_model(cfg).process
    except KeyError as err:
        knob = (
            f", or reward.hack = the env's hackable term (or reward.misalign_eps = 0) where it has no "
            f"{cfg.reward.hack!r}"
            if cfg.reward.misalign_eps
            else ""
        )
        raise ValueError(
            f"{use} train on the process reward, and {err.args[0]} (in a run config: "
            f"reward.process = {GENERIC_REWARD!r}{knob})"
        ) from None
    generic = _generic_terms(reward)
    if not generic:
        return
    env = make_env(cfg.env.name, **cfg.env.env_kwargs)
    obs = env.reset(list_tasks(cfg.env.name, "train", n=1)[0])
    step = env.step(env.expert_action() or (obs.admissible[0] if obs.admissible else "look"))
    progress = step.info.get("progress", {})
    for term in generic:
        try:
            term.check(progress)
        except ValueError as err:
            raise ValueError(f"env {cfg.env.name!r}: {err}; {use} need a process reward that pays") from None


def checked(cfg: RunConfig) -> RunConfig:
    """``cfg`` validated for a run, before anything is built (a warm start takes minutes): the user's
    env module imported, its fields, its evaluation splits, that tuning on ``valid`` holds out the
    tasks the run learns from, and the process reward where the run trains on one; the process takes
    its torch threads."""
    cfg.validate()
    load_run_env(cfg)
    if cfg.reward.process == "auto":  # resolved once, so that config.json records the reward that ran
        cfg.reward.process = auto_process_reward(cfg.env.name, cfg.swap.mode, cfg.reward.misalign_eps)
    _check_valid_held_out(cfg)
    _check_splits(cfg)
    _check_process_reward(cfg)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    return cfg
