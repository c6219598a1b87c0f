"""Registry of environments: ``register_env`` plugs any TextEnv into ``make_env`` and ``list_tasks``.

A user's env lives in a module of their own whose top level calls ``register_env``. Three doors
import it, all through ``load_env_module``: ``--env-module M`` on every command line that takes
``--env``, ``ENV_MODULE`` in the notebooks, and the entry-point group ``rspo_kit.envs`` of an
installed package (loaded the first time a name is not found).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rspo_kit.envs.base import Task, TextEnv

SPLITS = ("train", "valid", "eval", "eval_unseen")
# "valid" is not a split of its own: it is the tail of train, held out for tuning (tune on
# train and a validation subset of it, never on eval or eval_unseen). Its tasks keep their train ids.
VALID_SIZE = 240  # tasks; a fifth of train when train is smaller than 5 * VALID_SIZE


ENTRY_POINT_GROUP = "rspo_kit.envs"


@dataclass(frozen=True)
class EnvEntry:
    name: str
    make: Callable[..., TextEnv]
    list_tasks: Callable[[str], list[Task]]
    memory: type | None = None  # the prompt memory of this env's episodes; None: the generic one


class UnknownEnvError(KeyError):
    """No registered env has this name. A ``KeyError`` whose ``str`` is its message, unquoted, so
    that a command line prints it as one readable line."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class EnvModuleError(ImportError):
    """A module named to load envs from could not be imported, or registered no env."""


_REGISTRY: dict[str, EnvEntry] = {}
# Which module's import registered each env: ``load_env_module`` answers with these names.
_REGISTERED_BY: dict[str, set[str]] = {}
_LOADING: list[str] = []  # modules being imported by load_env_module, outermost first
_LOADED_FILES: dict[Path, str] = {}  # a .py file loaded by path -> its module name
_entry_points_loaded = False
_entry_point_failures: list[str] = []
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
    memory: type | None = None,
    overwrite: bool = False,
) -> None:
    """Register an environment.

    ``make(**kwargs)`` returns a fresh TextEnv; ``list_tasks(split)`` returns that split's tasks in a
    fixed order (``list_tasks`` of the registry slices it). ``memory`` is the class of the compact
    memory shown in this env's prompts (``rspo_kit.policy.prompts`` has the interface); without one
    the prompts use a generic memory.
    """
    if not name or not isinstance(name, str):
        raise ValueError(f"env name must be a non-empty string, got {name!r}")
    if not callable(make) or not callable(list_tasks):
        raise TypeError("register_env needs callables for make and list_tasks")
    if memory is not None and not isinstance(memory, type):
        raise TypeError(f"memory must be a class or None, got {memory!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"env {name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[name] = EnvEntry(name, make, list_tasks, memory)
    # the caller's module, and every module load_env_module is importing (a package's __init__
    # importing the submodule that registers): each of them registered this env
    caller = sys._getframe(1).f_globals.get("__name__", "")
    _REGISTERED_BY[name] = {caller, *_LOADING}


def _known_envs() -> list[str]:
    return sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))


def _unknown_env_message(name: str) -> str:
    """Why ``name`` is not found, and the three ways to import the module that registers it."""
    message = (
        f"unknown env {name!r}; registered envs: {_known_envs()}. To use your own env, import the "
        "module whose register_env call defines it: --env-module mypkg.envs (or a path to a .py file) "
        "on the command line, ENV_MODULE in a notebook, rspo_kit.envs.load_env_module in Python, or "
        f"an entry point of an installed package in the group {ENTRY_POINT_GROUP!r}"
    )
    if _entry_point_failures:
        message += "; entry points that failed to load: " + "; ".join(_entry_point_failures)
    return message


def _entry(name: str) -> EnvEntry:
    if name not in _REGISTRY and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    prefix = next((p for p in _BUILTIN_PREFIXES if name.startswith(p)), None)
    if name not in _REGISTRY and prefix is not None:
        importlib.import_module(_BUILTIN_PREFIXES[prefix]).resolve_env(name)
    if name not in _REGISTRY:
        load_entry_points()
    if name not in _REGISTRY:
        raise UnknownEnvError(_unknown_env_message(name))
    return _REGISTRY[name]


def _file_of(module: object, name: str) -> Path | None:
    """A module's source file, resolved, if its file name is ``name`` (resolving every module's
    path would touch the disk thousands of times)."""
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if isinstance(file, str) and Path(file).name == name else None


def _module_from_file(path: Path) -> str:
    """Import a ``.py`` file as a module (once per file); returns its module name.

    The module is named after the file where that name is free, so the envs it defines pickle by
    reference like any module's (``BatchRunner`` workers).
    """
    path = path.resolve()
    if path in _LOADED_FILES:
        return _LOADED_FILES[path]
    if not path.is_file():
        raise EnvModuleError(f"env module file {str(path)!r} does not exist")
    modules = list(sys.modules.values())
    imported = next((m.__name__ for m in modules if _file_of(m, path.name) == path), None)
    if imported is not None:  # imported already by its dotted name: importing it twice re-registers
        return imported
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else None
    name = name or "rspo_kit_env_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise EnvModuleError(f"cannot import env module file {str(path)!r}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    _LOADED_FILES[path] = name
    return name


def _is_file_spec(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def load_env_module(spec: str) -> list[str]:
    """Import the module ``spec`` (a dotted name, or a path to a ``.py`` file; several separated by
    commas) so that its ``register_env`` calls make its envs available by name; returns those names.

    Loading a module again is fine and returns the same names. Raises ``EnvModuleError`` naming the
    module and the import error when it cannot be imported, and when it registers no env.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise EnvModuleError(f"an env module is a dotted module name or a .py file, got {spec!r}")
    parts = [part.strip() for part in spec.split(",") if part.strip()]
    return list(dict.fromkeys(name for part in parts for name in _load_one(part)))


def load_env_modules(specs: Sequence[str] | None) -> list[str]:
    """``load_env_module`` of each of ``specs`` (a command line's repeated ``--env-module``), in order."""
    return list(dict.fromkeys(name for spec in specs or () for name in load_env_module(spec)))


def _load_one(spec: str) -> list[str]:
    _LOADING.append(spec)
    try:
        name = (
            _module_from_file(Path(spec)) if _is_file_spec(spec) else importlib.import_module(spec).__name__
        )
    except EnvModuleError:
        raise
    except Exception as err:
        raise EnvModuleError(f"cannot import env module {spec!r}: {type(err).__name__}: {err}") from err
    finally:
        _LOADING.pop()
    names = [env for env, by in _REGISTERED_BY.items() if name in by or spec in by]
    if not names:
        raise EnvModuleError(
            f"env module {spec!r} registered no env: call register_env(name, make, list_tasks) at its top level"
        )
    return names


def portable_env_module(spec: str) -> str:
    """``spec`` as a run's config or a sweep's cells keep it: files by their absolute paths (a
    resumed run or a notebook may start elsewhere), dotted names as they are; commas kept.

    >>> portable_env_module("mypkg.envs")
    'mypkg.envs'
    """
    parts = [part.strip() for part in spec.split(",") if part.strip()]
    return ",".join(str(Path(part).resolve()) if _is_file_spec(part) else part for part in parts)


ENV_MODULE_HELP = (
    "import this module first (a dotted name or a .py file; repeatable): its register_env calls make "
    "its envs available to --env"
)


def load_entry_points() -> list[str]:
    """Load the installed packages' env modules (entry-point group ``rspo_kit.envs``), once.

    An entry point names a module whose import registers envs, or a function that registers them when
    called. A failing one is remembered (the unknown-env error lists it) and does not stop the others.
    Returns the names of the envs registered by this call.
    """
    global _entry_points_loaded
    if _entry_points_loaded:
        return []
    _entry_points_loaded = True
    before = set(_REGISTRY)
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
            if callable(loaded):
                loaded()
        except Exception as err:
            _entry_point_failures.append(f"{point.name} = {point.value} ({type(err).__name__}: {err})")
    return sorted(set(_REGISTRY) - before)


def require_env(name: str) -> None:
    """Nothing if ``name`` is a registered env (registering a built-in on first use); else an
    ``UnknownEnvError`` (a ``KeyError``) whose message lists the envs and the ways to register one."""
    _entry(name)


def ensure_registered(name: str) -> bool:
    """Register a built-in env or a built-in family's name (``chain-4x2-cap8``) on first use, as
    ``make_env`` would; False for a name nothing registers (no error)."""
    try:
        _entry(name)
    except KeyError:
        return False
    return True


def registered_envs() -> list[str]:
    return _known_envs()


def env_memory(name: str) -> type | None:
    """The prompt memory class registered beside env ``name``; ``None`` when it registered none
    (the built-in envs keep theirs in ``rspo_kit.policy.prompts``) or nothing registers ``name``."""
    return _entry(name).memory if ensure_registered(name) else None


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
