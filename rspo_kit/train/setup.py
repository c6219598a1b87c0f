"""A run's policies: its starting policy (the preset, warm-started by SFT on search-expert
demonstrations) and, once it trained, its actor (``trained_actor``), both built from its config.

The warm start is cached under ``<cache>/warmstart/<key>/policy`` where the key hashes everything
that shapes it (env, engine, preset, action mode, demonstrations, SFT budget and lr), so every run
and every seed of a sweep starts from the same checkpoint, and only the first pays for it. SFT
trains on one torch thread whatever the caller set (``rspo_kit.policy.sft.SFT_THREADS``): on two its
rounding is not reproducible, and a cache key would name two different checkpoints on two machines.
A scratch preset (tiny, small) run on a user's env learns its tokenizer on that env's episodes too
(``preset_source``); on the built-in envs it is the one preset they all share.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from rspo_kit.envs.base import Task
from rspo_kit.envs.registry import load_env_module
from rspo_kit.paths import atomic_write_text, cache_dir, committed_warm_start_digest, repository_path
from rspo_kit.policy.adapters import ActorExplorer
from rspo_kit.policy.models import (
    CORPUS_VERSION,
    corpus_env,
    load_model,
    preset_for,
    weights_digest,
)
from rspo_kit.policy.models import PRESETS as SCRATCH_PRESETS
from rspo_kit.policy.rollout import Policy
from rspo_kit.records.files import read_record
from rspo_kit.train.checkpoint import latest_checkpoint, load_checkpoint
from rspo_kit.train.config import RunConfig


def load_run_env(cfg: RunConfig) -> None:
    """Import the user's env module that ``cfg.env.module`` names, if any: its ``register_env`` calls
    make ``cfg.env.name`` (and an ``sft_env`` it defines) known before anything builds an env."""
    if cfg.env.module:
        load_env_module(cfg.env.module)


def tokenizer_env(cfg: RunConfig) -> str | None:
    """The user's env whose episodes a scratch preset's tokenizer learns besides the built-ins' text
    (``rspo_kit.policy.models.preset_corpus``): the run's env where the built-in corpus lacks it."""
    return corpus_env(cfg.env.name) if cfg.policy.preset in SCRATCH_PRESETS else None


def preset_source(cfg: RunConfig, seed: int) -> str:
    """What ``Policy.load`` loads as the run's preset (``preset_for`` on the run's env): the scratch
    preset built with the user env's text in its tokenizer (a folder) where ``tokenizer_env`` names one,
    else ``policy.preset`` itself."""
    return preset_for(cfg.policy.preset, cfg.env.name, seed)


def warmstart_recipe(cfg: RunConfig) -> dict:
    """Everything that shapes ``cfg``'s warm start: what its cache key hashes."""
    p, e = cfg.policy, cfg.env
    return {
        "env": p.sft_env or e.name,
        "engine": e.engine,
        # demonstrations are collected under the run's episode cap, or sft_env's own
        "max_steps": None if p.sft_env else e.max_steps,
        "preset": p.preset,
        "mode": p.mode,
        "demo_tasks": p.sft_demo_tasks,
        **({"updates": p.sft_updates} if p.sft_updates else {"minutes": p.sft_minutes}),
        "lr": p.sft_lr,
        "balance": p.sft_balance,
        # only where set: the keys of warm starts without DAgger rounds stay what they are
        **({"dagger_rounds": p.sft_dagger_rounds} if p.sft_dagger_rounds else {}),
        **({"label_noise": p.sft_label_noise} if p.sft_label_noise else {}),
        **({"exclude_kinds": sorted(p.sft_exclude_kinds)} if p.sft_exclude_kinds else {}),
        # a scratch preset's tokenizer and initial weights follow the corpus: a warm start built here
        # from an older corpus must not be reused (one installed from a folder carries its own tokenizer)
        **({"corpus": CORPUS_VERSION} if p.preset in SCRATCH_PRESETS and not p.warmstart_from else {}),
        # a user's env whose text the scratch tokenizer learnt too (only there: built-in keys stay)
        **({"corpus_env": tokenizer_env(cfg)} if tokenizer_env(cfg) and not p.warmstart_from else {}),
        "version": 6,  # bump when the SFT recipe, the prompt layout or the memory changes
    }


def demonstration_tasks(cfg: RunConfig) -> list[Task]:
    """The train tasks whose demonstrations ``cfg``'s warm start learns from: ``policy.sft_demo_tasks``
    of ``policy.sft_env`` (else the run's env), leaving out ``policy.sft_exclude_kinds``; a kind the
    env does not have is a ValueError naming the field and the env's kinds."""
    from rspo_kit.policy import sft

    p = cfg.policy
    try:
        return sft.demonstration_tasks(p.sft_env or cfg.env.name, p.sft_demo_tasks, p.sft_exclude_kinds)
    except ValueError as err:
        raise ValueError(f"policy.sft_exclude_kinds = {p.sft_exclude_kinds!r}: {err}") from None


def warmstart_key(cfg: RunConfig) -> str:
    recipe = warmstart_recipe(cfg)
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return f"{recipe['env']}_{Path(cfg.policy.preset).name}_{digest}"


def initial_policy(cfg: RunConfig, progress_bar: bool = True) -> tuple[Policy, dict]:
    """The run's starting policy and a small report (where it came from, SFT stats if trained now).

    With ``policy.warmstart_from`` the saved warm start there is installed into the cache first
    (``install_warmstart``: an error if the cache holds other weights under the run's key), so the
    run starts from those weights instead of an SFT run of its own.
    """
    load_run_env(cfg)
    mode = None if cfg.policy.mode == "preset" else cfg.policy.mode
    if not cfg.policy.warmstart:
        policy = Policy.load(preset_source(cfg, cfg.train.seed), mode=mode, seed=cfg.train.seed)
        return policy, {"warmstart": None, "preset": cfg.policy.preset}
    tasks = demonstration_tasks(cfg)  # a kind the env lacks fails here, before an install or SFT
    source = {"installed_from": cfg.policy.warmstart_from} if cfg.policy.warmstart_from else {}
    if source:
        install_warmstart(cfg, cfg.policy.warmstart_from)
    folder = cache_dir() / "warmstart" / warmstart_key(cfg) / "policy"
    if (folder / "config.json").exists():
        return Policy.load(str(folder), mode=mode), {"warmstart": str(folder), "cached": True, **source}
    from rspo_kit.envs.batch import BatchRunner
    from rspo_kit.policy.sft import SFTConfig, save_policy, warm_start

    policy = Policy.load(preset_source(cfg, 0), mode=mode, seed=0)  # one warm start shared by all seeds
    torch.manual_seed(0)
    start = time.perf_counter()
    sft_cfg = SFTConfig(
        lr=cfg.policy.sft_lr,
        batch_size=16,
        epochs=50,
        time_budget_s=None if cfg.policy.sft_updates else 60 * cfg.policy.sft_minutes,
        max_updates=cfg.policy.sft_updates,
        balance=cfg.policy.sft_balance,
        dagger_rounds=cfg.policy.sft_dagger_rounds,
        label_noise=cfg.policy.sft_label_noise,
    )
    env = cfg.policy.sft_env or cfg.env.name
    kwargs = {"engine": cfg.env.engine} if cfg.policy.sft_env and cfg.env.engine else cfg.env.env_kwargs
    with BatchRunner(env, n_workers=cfg.env.n_workers, env_kwargs=kwargs) as runner:
        done = warm_start(policy, runner, tasks, sft_cfg, progress_bar=progress_bar)
    save_policy(policy, folder)
    report = {
        "warmstart": str(folder),
        "cached": False,
        "demonstrations": done["demonstrations"],
        "dagger": done["dagger"],
        "sft_updates": done["sft"]["updates"],
        "sft_final_loss": sum(done["sft"]["losses"][-20:]) / max(1, len(done["sft"]["losses"][-20:])),
        "sft_losses": done["sft"]["losses"],  # where two builds of one key part, if they do
        "machine": done["machine"],
        "weights_sha256": weights_digest(policy.model),  # a rebuild elsewhere is this policy iff it matches
        "seconds": time.perf_counter() - start,
    }
    (folder.parent / "report.json").write_text(json.dumps(report, indent=1))
    return Policy.load(str(folder), mode=mode), report


def install_warmstart(cfg: RunConfig, source: str | Path) -> dict:
    """Put a saved warm start (a policy folder, e.g.
    ``data/warm_starts/alfworld_tiny_sft1536_cap30/policy``; relative to the repository root) into
    the cache under the key ``cfg`` looks up, so that every run of this configuration starts from it
    instead of an SFT run of its own: how a result is continued on another kind of CPU, where the same
    recipe builds another policy. Returns ``{"folder", "weights_sha256", "installed"}``; ``installed`` is False
    when the cache held these weights already. Where the source has a ``recipe.json`` beside it (the
    committed ones do: ``warmstart_recipe`` of the configuration that built it), it must be ``cfg``'s:
    weights of 1,536 SFT updates do not go under the key of 3,000; a committed one must load to the
    digest ``data/warm_starts/manifest.json`` records. A cache holding other weights under
    the key (a warm start built here) is an error rather than replaced: runs from it may exist.
    """
    if not cfg.policy.warmstart:
        raise ValueError(
            "this configuration does not warm start (policy.warmstart is false): no run would read it"
        )
    source = repository_path(source)
    if not (source / "config.json").exists():
        raise FileNotFoundError(f"{source} is not a saved policy folder (no config.json)")
    recipe = source.parent / "recipe.json"
    if recipe.exists():
        built, wanted = json.loads(recipe.read_text()), warmstart_recipe(cfg)
        differ = sorted(k for k in {*built, *wanted} if built.get(k) != wanted.get(k))
        if differ:
            shown = ", ".join(f"{k} {built.get(k)!r} (this run: {wanted.get(k)!r})" for k in differ)
            raise ValueError(f"{source} was built by another recipe: {shown}")
    digest = weights_digest(load_model(str(source))[0])
    committed = committed_warm_start_digest(source)
    if committed is not None and committed != digest:
        raise ValueError(
            f"{source} loads to weights {digest[:12]}, not the {committed[:12]} that data/warm_starts/manifest.json "
            "records for it: the committed warm start is damaged or was replaced (git checkout restores it)"
        )
    folder = cache_dir() / "warmstart" / warmstart_key(cfg) / "policy"
    if not (folder / "config.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = folder.with_name(f"policy.partial.{os.getpid()}")  # parallel sweep cells install at once
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial)
        build_report = source.parent / "report.json"  # what the build recorded, where it is beside the folder
        report = json.loads(build_report.read_text()) if build_report.exists() else {}
        report |= {"warmstart": str(folder), "installed_from": str(source), "weights_sha256": digest}
        atomic_write_text(folder.parent / "report.json", json.dumps(report, indent=1))
        try:
            partial.rename(folder)
            return {"folder": str(folder), "weights_sha256": digest, "installed": True}
        except OSError:  # another process installed a folder there meanwhile: compared below
            shutil.rmtree(partial, ignore_errors=True)
    held = weights_digest(load_model(str(folder))[0])
    if held != digest:
        raise ValueError(
            f"the cache holds another warm start under this key ({folder}: weights {held[:12]}, "
            f"not {source}'s {digest[:12]}); remove that folder to install {source}"
        )
    return {"folder": str(folder), "weights_sha256": digest, "installed": False}


def uses_lora(cfg: RunConfig, base: Policy) -> bool:
    """LoRA adapters for pretrained models, full fine-tuning (and copies) for the tiny presets."""
    if cfg.policy.lora is not None:
        return cfg.policy.lora
    return sum(p.numel() for p in base.model.parameters()) > 50e6


def policy_scoring(cfg: RunConfig) -> dict[str, Any]:
    """The run's settings of how its policies score candidates (``Policy`` fields): the config decides
    them, not the policy a run was handed, so that ``config.json`` says how the actor chose."""
    return {"choice_score": cfg.policy.choice_score}


def trained_actor(run_dir: str | Path) -> Policy:
    """The actor of a training run at its latest checkpoint, e.g. to evaluate it on more tasks.

    Read-only: nothing in ``run_dir`` changes (``python -m rspo_kit.evaluate --policy RUN_DIR``).
    """
    run_dir = Path(run_dir)
    folder = latest_checkpoint(run_dir)
    if folder is None or not (run_dir / "config.json").exists():
        raise FileNotFoundError(f"{run_dir} is not a training run with a checkpoint (config.json, latest)")
    cfg = read_record(run_dir / "config.json", RunConfig.from_dict)
    # the checkpoint holds every weight of the actor (the whole model; with LoRA the base too), so the
    # preset only gives the architecture and tokenizer (a user env's own, for a scratch preset): no warm
    # start to rebuild or install
    load_run_env(cfg)
    mode = None if cfg.policy.mode == "preset" else cfg.policy.mode
    source = preset_source(cfg, cfg.train.seed)
    base = replace(Policy.load(source, mode=mode, seed=cfg.train.seed), **policy_scoring(cfg))
    pair = ActorExplorer(base, lora=uses_lora(cfg, base), rank=cfg.policy.lora_rank, reference=False)
    load_checkpoint(folder, {"actor": pair._models["actor"]}, {})
    return pair.policy("actor")
