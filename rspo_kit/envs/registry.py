"""Registry of environments: ``register_env`` plugs any TextEnv into ``make_env`` and ``list_tasks``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from rspo_kit.envs.base import Task, TextEnv

SPLITS = ("train", "eval", "eval_unseen")


@dataclass(frozen=True)
class EnvEntry:
    name: str
    make: Callable[..., TextEnv]
    list_tasks: Callable[[str], list[Task]]


_REGISTRY: dict[str, EnvEntry] = {}
# Built-in envs register themselves when their module is imported; importing lazily keeps
# `import rspo_kit.envs` free of the alfworld/textworld import cost.
_BUILTIN_MODULES = {"alfworld": "rspo_kit.envs.alfworld", "webshop": "rspo_kit.envs.webshop"}


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
    if name not in _REGISTRY:
        known = sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))
        raise KeyError(f"unknown env {name!r}; registered envs: {known}")
    return _REGISTRY[name]


def registered_envs() -> list[str]:
    return sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))


def make_env(name: str, **kwargs) -> TextEnv:
    """A fresh environment instance, e.g. ``make_env("alfworld", max_steps=30)``."""
    return _entry(name).make(**kwargs)


def list_tasks(name: str, split: str = "train", n: int | None = None) -> list[Task]:
    """The first ``n`` tasks (all if ``None``) of a split, always in the same order.

    Built-in envs know the splits ``train``, ``eval`` and ``eval_unseen`` (see ``SPLITS``).
    """
    if n is not None and n < 0:
        raise ValueError(f"n must be >= 0 or None, got {n}")
    tasks = list(_entry(name).list_tasks(split))
    return tasks if n is None else tasks[:n]
