"""Run configuration, presets and the trainer: ``preset(...)`` -> ``train(cfg)`` -> ``RunResult``.

>>> from rspo_kit.train import preset
>>> cfg = preset("tiny", env="alfworld", algo="gigpo", swap=True, seed=0)
>>> cfg.swap.mode, cfg.reward.train_on, cfg.algo.name
('rspo', 'outcome', 'gigpo')

The names below load on first use, so that ``import rspo_kit.train.config`` (and the CLI's
``--help``) does not import torch and the trainer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rspo_kit._lazy import lazy_exports, submodule_homes

if TYPE_CHECKING:
    from rspo_kit.train.checkpoint import CheckpointError
    from rspo_kit.train.config import (
        VARIANTS,
        AlgoConfig,
        EnvConfig,
        PolicyConfig,
        RewardConfig,
        RunConfig,
        SwapConfig,
        TrainConfig,
        variant_of,
    )
    from rspo_kit.train.presets import PRESETS, from_parameters, preset
    from rspo_kit.train.resume import resumable
    from rspo_kit.train.setup import initial_policy
    from rspo_kit.train.trainer import EVENTS, Event, RunResult, Trainer, TrainingStopped, train

__all__ = [
    "EVENTS",
    "PRESETS",
    "VARIANTS",
    "AlgoConfig",
    "CheckpointError",
    "EnvConfig",
    "Event",
    "PolicyConfig",
    "RewardConfig",
    "RunConfig",
    "RunResult",
    "SwapConfig",
    "TrainConfig",
    "Trainer",
    "TrainingStopped",
    "from_parameters",
    "initial_policy",
    "preset",
    "resumable",
    "train",
    "variant_of",
]

_NAMES = {
    "checkpoint": ("CheckpointError",),
    "config": (
        "VARIANTS",
        "AlgoConfig",
        "EnvConfig",
        "PolicyConfig",
        "RewardConfig",
        "RunConfig",
        "SwapConfig",
        "TrainConfig",
        "variant_of",
    ),
    "presets": ("PRESETS", "from_parameters", "preset"),
    "resume": ("resumable",),
    "setup": ("initial_policy",),
    "trainer": ("EVENTS", "Event", "RunResult", "Trainer", "TrainingStopped", "train"),
}
_HOME = submodule_homes(__name__, _NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOME)
