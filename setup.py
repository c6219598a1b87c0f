"""Package discovery only; all metadata lives in pyproject.toml.

setuptools' declarative config cannot map ``widgets/`` to the import name ``rspo_widgets`` while also
discovering ``rspo_kit`` subpackages, so the two lists are joined here.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["rspo_kit", "rspo_kit.*"])
    + ["rspo_widgets"]
    + [f"rspo_widgets.{p}" for p in find_packages("widgets")],
    package_dir={"rspo_widgets": "widgets"},
)
