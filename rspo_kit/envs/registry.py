"""Registry of environments: ``register_env`` plugs any TextEnv into ``make_env`` and ``list_tasks``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from rspo_kit.envs.base import Task, TextEnv

SPLITS = ("train", "valid", "eval", "eval_unseen")
# "valid" is not a split of its own: it is the tail of train, held out for tuning (tune on
# train and a validation subset of it, never on eval or eval_unseen). Its tasks keep their train ids.
VALID_SIZE = 240  # tasks; a fifth of train when train is smaller than 5 * VALID_SIZE


@dataclass(frozen=True)
class EnvEntry:
    name: str
    make: Callable[..., TextEnv]
    list_tasks: Callable[[str], list[Task]]


_REGISTRY: dict[str, EnvEntry] = {}
# Built-in envs register themselves when their module is imported; importing lazily keeps
# `import rspo_kit.envs` free of the alfworld/textworld import cost.
_BUILTIN_MODULES = {
    "alfworld": "rspo_kit.envs.alfworld",
    "webshop": "rspo_kit.envs.webshop",
    **{level: "rspo_kit.envs.chain" for level in ("chain-4x2", "chain-6x3", "chain-8x4")},
}
# Families of names a built-in module registers on demand (its ``resolve_env(name)``): any
# ``chain-<length>x<doors>`` is a level of the chain testbed.
_BUILTIN_PREFIXES = {"chain-": "rspo_kit.envs.chain"}


def register_env(
    name: str,
    make: Callable[..., TextEnv],
    list_tasks: Callable[[str], list[Task]],
    *,
    overwrite: bool = False,
) -> None:
    """Register an environment.

    ``make(**kwargs)`` returns a fresh TextEnv; ``list_tasks(split)`` returns that split's tasks in a
    fixed order (``list_tasks`` of the registry slices it).
    """
    if not name or not isinstance(name, str):
        raise ValueError(f"env name must be a non-empty string, got {name!r}")
    if not callable(make) or not callable(list_tasks):
        raise TypeError("register_env needs callables for make and list_tasks")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"env {name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[name] = EnvEntry(name, make, list_tasks)


def _entry(name: str) -> EnvEntry:
    if name not in _REGISTRY and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    prefix = next((p for p in _BUILTIN_PREFIXES if name.startswith(p)), None)
    if name not in _REGISTRY and prefix is not None:
        importlib.import_module(_BUILTIN_PREFIXES[prefix]).resolve_env(name)
    if name not in _REGISTRY:
        known = sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))
        raise KeyError(f"unknown env {name!r}; registered envs: {known}")
    return _REGISTRY[name]


def ensure_registered(name: str) -> bool:
    """Register a built-in env or a built-in family's name (``chain-4x2-cap8``) on first use, as
    ``make_env`` would; False for a name nothing registers (no error)."""
    try:
        _entry(name)
    except KeyError:
        return False
    return True


def registered_envs() -> list[str]:
    return sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))


def make_env(name: str, **kwargs) -> TextEnv:
    """A fresh environment instance, e.g. ``make_env("alfworld", max_steps=30)``."""
    return _entry(name).make(**kwargs)


def list_tasks(name: str, split: str = "train", n: int | None = None) -> list[Task]:
    """The first ``n`` tasks (all if ``None``) of a split, always in the same order.

    Built-in envs know the splits ``train``, ``eval`` and ``eval_unseen`` (see ``SPLITS``); every env
    also has ``valid``: its train tasks from index ``valid_start(name)`` on, held out for tuning.
    Train on the first ``valid_start(name)`` train tasks at most to keep the two apart.
    """
    if n is not None and n < 0:
        raise ValueError(f"n must be >= 0 or None, got {n}")
    if split == "valid":
        train = list(_entry(name).list_tasks("train"))
        tasks = train[_valid_start(len(train)) :]
    else:
        tasks = list(_entry(name).list_tasks(split))
    return tasks if n is None else tasks[:n]


def _valid_start(n_train: int) -> int:
    return n_train - min(VALID_SIZE, n_train // 5)


def valid_start(name: str) -> int:
    """Index of the first train task of the ``valid`` split: train on ``train[:valid_start]`` only.

    >>> valid_start("alfworld")  # 3,000 train tasks, the last 240 held out
    2760
    """
    return _valid_start(len(_entry(name).list_tasks("train")))
