"""The install names every package of the tree: pyproject.toml's explicit list against the folders."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the install itself needs none of this
ROOT = Path(__file__).resolve().parents[1]


def _packages_in(folder: Path, name: str) -> set[str]:
    return {
        ".".join((name, *init.parent.relative_to(folder).parts))
        for init in folder.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_pyproject_lists_every_package_of_the_tree_and_maps_the_widgets():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["package-dir"] == {"rspo_widgets": "widgets"}
    in_tree = _packages_in(ROOT / "rspo_kit", "rspo_kit") | _packages_in(ROOT / "widgets", "rspo_widgets")
    assert set(tool["packages"]) == in_tree
    assert not (ROOT / "setup.py").exists()  # pyproject.toml alone says how to install
