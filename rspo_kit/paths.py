"""Where rspo_kit reads curated inputs and writes derived artefacts.

Curated inputs (split manifests, vocabularies, the committed warm starts and progress models) live in
the repository's ``data/``. Everything derived
(generated game files, tokenizers, checkpoints) goes to a cache directory, never into git and never
into the home directory of a machine that did not ask for it:

* ``RSPO_KIT_CACHE`` if set;
* otherwise ``<checkout>/.cache`` when rspo_kit runs from a source checkout (the usual case);
* otherwise ``~/.cache/rspo_kit``.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_CHECKOUT_DIR = _PACKAGE_DIR.parent


def data_dir() -> Path:
    """The curated ``data/`` directory (override with ``RSPO_KIT_DATA``)."""
    override = os.environ.get("RSPO_KIT_DATA")
    path = Path(override) if override else _CHECKOUT_DIR / "data"
    if not path.is_dir():
        raise FileNotFoundError(
            f"rspo_kit data directory not found at {path}. Run from a source checkout of rspo_kit "
            "or point RSPO_KIT_DATA at its data/ directory."
        )
    return path


def cache_dir() -> Path:
    """Root of all derived artefacts; created on first use."""
    override = os.environ.get("RSPO_KIT_CACHE")
    if override:
        path = Path(override)
    elif (_CHECKOUT_DIR / "pyproject.toml").is_file():
        path = _CHECKOUT_DIR / ".cache"
    else:
        path = Path.home() / ".cache" / "rspo_kit"
    path.mkdir(parents=True, exist_ok=True)
    return path


def repository_path(path: str | os.PathLike) -> Path:
    """``path`` itself if absolute, else relative to the source checkout (the working directory where
    rspo_kit is installed without one): a committed file such as ``data/warm_starts/...`` is found
    from ``notebooks/`` as from the repository root."""
    path = Path(path)
    if path.is_absolute() or not (_CHECKOUT_DIR / "pyproject.toml").is_file():
        return path
    return _CHECKOUT_DIR / path


# the committed starting policies (weights, recipe, build report, evaluation) and their manifest
WARM_STARTS_DIR = "data/warm_starts"
WARM_START_MANIFEST = f"{WARM_STARTS_DIR}/manifest.json"


def warm_start_policy(name: str) -> str:
    """The policy folder of the committed warm start ``name`` (a folder of ``data/warm_starts/``), as a
    preset's ``policy.warmstart_from`` names it: relative to the repository root.

    >>> warm_start_policy("chain4x2_tiny_sft1200_noise05")
    'data/warm_starts/chain4x2_tiny_sft1200_noise05/policy'
    """
    return f"{WARM_STARTS_DIR}/{name}/policy"


def committed_warm_start_digest(policy_folder: str | os.PathLike) -> str | None:
    """The weights digest the manifest of ``data/warm_starts/`` records for ``policy_folder``; None where
    the folder is not a committed warm start (a user's own saved policy)."""
    import json

    folder = repository_path(policy_folder).resolve()
    root = repository_path(WARM_STARTS_DIR).resolve()
    if folder.name != "policy" or folder.parent.parent != root:
        return None
    manifest = repository_path(WARM_START_MANIFEST)
    entries = json.loads(manifest.read_text())["warm_starts"] if manifest.is_file() else {}
    entry = entries.get(folder.parent.name)
    return entry["weights_sha256"] if entry else None


def alfworld_data_dir() -> Path:
    """The directory alfworld calls ``ALFWORLD_DATA``.

    A user who points ``ALFWORLD_DATA`` at the official ALFWorld files keeps it; otherwise it is set to
    a folder of our cache so that alfworld never writes to the home directory.
    """
    current = os.environ.get("ALFWORLD_DATA")
    if current:
        return Path(current)
    path = cache_dir() / "alfworld"
    path.mkdir(parents=True, exist_ok=True)
    os.environ["ALFWORLD_DATA"] = str(path)
    return path


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_split_manifest(path: Path, writer: str) -> str:
    """The text of a committed split manifest; a missing one is a FileNotFoundError naming the module
    ``writer`` whose ``python -m`` writes it again."""
    if not path.is_file():
        raise FileNotFoundError(f"missing split manifest {path}; run `python -m {writer}`")
    return path.read_text()
