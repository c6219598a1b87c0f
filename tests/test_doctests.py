"""Every docstring example in the library runs (rewards has its own, stricter doctest tests)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "rspo_kit.envs.base",
    "rspo_kit.envs.webshop.pages",
    "rspo_kit.envs.webshop.expert",
    "rspo_kit.envs.webshop.reward",
    "rspo_kit.envs.alfworld.native",
    "rspo_kit.policy.experts",
    "rspo_kit.policy.prompts",
    "rspo_kit.policy.evaluate",
    "rspo_kit.rewards.signals",
    "rspo_kit.train",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
