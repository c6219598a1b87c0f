"""Every docstring example in the library runs (found by walking the package, so none is forgotten)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import rspo_kit


def _modules_with_examples() -> list[str]:
    names = ["rspo_kit"]
    names += [
        m.name
        for m in pkgutil.walk_packages(rspo_kit.__path__, "rspo_kit.")
        if not m.name.endswith("__main__")
    ]
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec and spec.origin and ">>>" in Path(spec.origin).read_text():
            found.append(name)
    return found


MODULES = _modules_with_examples()


def test_the_walk_finds_the_examples():
    assert {
        "rspo_kit.train.config",
        "rspo_kit.experiments.tables",
        "rspo_kit.studies.regime_map",
        "rspo_kit.rewards.process",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
