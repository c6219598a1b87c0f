"""Whether a run folder resumes under a configuration: what a run computes, and the fields that may
change on resume without changing it (``RESUMABLE_FIELDS``).

``resumable(cfg)`` says whether ``cfg.train.run_dir`` holds a checkpoint of this same run (a killed
notebook or sweep cell continues from it); ``differences`` names, field by field, what a configuration
would compute differently from a stored run (``stored_config``), which ``train(resume=...)`` refuses;
``restore_newest`` finds the checkpoint a resumed run continues from.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from rspo_kit.records.files import read_record
from rspo_kit.rewards.progress_model import auto_process_reward
from rspo_kit.train.checkpoint import CheckpointError, checkpoints, latest_checkpoint
from rspo_kit.train.config import RunConfig

if TYPE_CHECKING:
    from rspo_kit.train.trainer import Trainer

# fields that change how long a run trains, how it executes and what it evaluates, not what it learns:
# a run may resume under other values (a finished run then adds the final evaluations it lacks). Not
# eval_split: one run's eval/* curve is on one split
RESUMABLE_FIELDS = tuple(
    f"train.{name}"
    for name in (
        "iterations",
        "updates",
        "max_env_steps",
        "eval_every",
        "eval_n",
        "final_eval_split",
        "final_eval_n",
        "final_eval_sampled",
        "final_eval_greedy",
        "checkpoint_every",
        "tables",
        "threads",
        "progress_bar",
        "run_dir",
    )
)


def _what_it_computes(cfg: RunConfig) -> dict:
    d = cfg.to_dict()
    if d["reward"]["process"] == "auto":  # the reward that runs: checked resolves it, config.json keeps it
        d["reward"]["process"] = auto_process_reward(cfg.env.name, cfg.swap.mode, cfg.reward.misalign_eps)
    d["train"] = {k: v for k, v in d["train"].items() if f"train.{k}" not in RESUMABLE_FIELDS}
    d["swap"]["explorer_lr"] = cfg.explorer_lr  # an explicit value equal to the default's is the same run
    d["swap"]["explorer_temperature"] = cfg.explorer_temperature  # likewise
    d["policy"].pop("warmstart_from")  # where the warm start came from: installing it checks its weights
    if not cfg.policy.warmstart:  # the SFT settings of a warm start the run does not do
        d["policy"] = {k: v for k, v in d["policy"].items() if not k.startswith("sft_")}
    return d


def resumable(cfg: RunConfig) -> Path | None:
    """``cfg.train.run_dir`` if it holds a checkpoint of this same run, else None: ``train(cfg, resume=...)``.

    So a notebook or a sweep cell that was killed continues from its last iteration when it runs
    again. A checkpoint of a different configuration there raises instead of being mixed with this
    run (only iterations, threads, the progress bar and the final evaluation may differ: a finished
    run resumed with other final splits, more tasks or sampled evaluation adds what it lacks; the
    SFT settings count only for a run that warm-starts itself).
    """
    if not cfg.train.run_dir:
        return None
    run_dir = Path(cfg.train.run_dir)
    if not checkpoints(run_dir) or not (run_dir / "config.json").exists():
        return None
    diff = differences(stored_config(run_dir), cfg)
    if diff:
        raise ValueError(
            f"{run_dir} holds a checkpointed run of another configuration ({'; '.join(diff)}); "
            "delete that folder or choose another run_dir"
        )
    return run_dir


def differences(stored: RunConfig, cfg: RunConfig) -> list[str]:
    """What ``cfg`` would compute differently from the ``stored`` run, field by field."""
    ours, theirs = _what_it_computes(cfg), _what_it_computes(stored)
    return [
        f"{section}.{k}: {theirs[section].get(k)!r} there, {v!r} here"
        for section, fields in ours.items()
        for k, v in fields.items()
        if theirs[section].get(k) != v
    ]


def stored_config(run_dir: str | Path) -> RunConfig:
    """The configuration a run folder was trained under (its ``config.json``), or an error naming it."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise CheckpointError(run_dir, "is not a training run: it has no config.json")
    return read_record(path, RunConfig.from_dict)


def restore_newest(trainer: Trainer) -> Path:
    """Restore into ``trainer`` the newest checkpoint of its run that loads: the one ``latest`` names,
    else an older one, with a warning that names what could not be loaded. ``CheckpointError`` naming
    the run folder when none loads: a resumed run never silently starts over."""
    first = latest_checkpoint(trainer.run_dir)
    if first is None:
        raise CheckpointError(
            trainer.run_dir,
            "holds no checkpoint to resume from (no latest, no ckpt-* folder); "
            "train it anew without resume, or delete it",
        )
    number = int(first.name[5:].partition(".")[0])
    older = [c for c in checkpoints(trainer.run_dir) if int(c.name[5:].partition(".")[0]) < number]
    failures: list[str] = []
    for folder in [first, *older]:
        try:
            trainer.restore(folder)
        except CheckpointError as err:
            failures.append(str(err))
            continue
        if failures:
            warnings.warn(f"{'; '.join(failures)}: resuming from {folder} instead", stacklevel=2)
        return folder
    raise CheckpointError(trainer.run_dir, f"holds no loadable checkpoint: {'; '.join(failures)}")
