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

from rspo_kit._lazy import lazy_exports

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

_CONFIG = (
    "VARIANTS",
    "AlgoConfig",
    "EnvConfig",
    "PolicyConfig",
    "RewardConfig",
    "RunConfig",
    "SwapConfig",
    "TrainConfig",
    "variant_of",
)
_HOME = {name: "rspo_kit.train.config" for name in _CONFIG}
_HOME |= {name: "rspo_kit.train.presets" for name in ("PRESETS", "from_parameters", "preset")}
_HOME |= {name: "rspo_kit.train.trainer" for name in ("EVENTS", "Event", "RunResult", "Trainer")}
_HOME |= {name: "rspo_kit.train.trainer" for name in ("TrainingStopped", "train")}
_HOME |= {"resumable": "rspo_kit.train.resume"}
_HOME |= {"CheckpointError": "rspo_kit.train.checkpoint"}
_HOME |= {"initial_policy": "rspo_kit.train.setup"}

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


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
