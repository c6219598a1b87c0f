"""Package names that load from their modules on first use (PEP 562), so that importing a package
costs only what its caller reads: the CLI's ``--help`` and the config import neither torch nor pandas.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, where ``homes`` maps each name to its module.

    Use inside the package's ``__init__``: ``__getattr__, __dir__ = lazy_exports(__name__, _HOME)``.
    A name is imported once; the package then holds it as a plain attribute.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(homes[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *homes])

    return __getattr__, __dir__


def submodule_homes(package: str, names: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """``homes`` for ``lazy_exports`` from a table of ``package``'s submodules and the names each defines.

    >>> submodule_homes("rspo_kit.algos", {"gae": ("turn_gae", "whiten")})
    {'turn_gae': 'rspo_kit.algos.gae', 'whiten': 'rspo_kit.algos.gae'}
    """
    return {name: f"{package}.{module}" for module, defined in names.items() for name in defined}
