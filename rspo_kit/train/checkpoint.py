"""Checkpoints: safetensors for every tensor (weights, optimizer moments), JSON for the rest.

A checkpoint is a folder ``ckpt-<iteration>`` written as ``ckpt-<iteration>.tmp`` and renamed when
complete; the file ``latest`` names the newest complete one (written atomically too). A kill at any
moment leaves the previous checkpoint intact, also when the same iteration is saved again (a
finished run that adds evaluations): the old folder steps aside as ``ckpt-<iteration>.old`` until
the new one is in place, and ``latest_checkpoint`` finds it there. Nothing is unpickled on load:
tensors come from safetensors, everything else from JSON (replay trajectories as gzipped JSON).

What is saved is checked: no checkpoint is written from a parameter or optimizer moment that is not
finite, and ``state.json`` records the SHA-256 of every tensor, which loading verifies: a flipped
bit, a missing or an extra tensor is a ``CheckpointError`` naming the tensor and the file. Every
file of a checkpoint is read through ``rspo_kit.records.files``, so that a truncated or incomplete
one is a ``CheckpointError`` (a ``RecordError``) whose message starts with its path. A damaged or
missing ``latest`` falls back to the newest checkpoint folder, with a warning that says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import re
import shutil
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from rspo_kit.paths import atomic_write_text
from rspo_kit.policy.models import tensor_digest
from rspo_kit.policy.rollout import Step, Trajectory
from rspo_kit.records.files import RecordError, read_json, read_json_gz, require_keys

TENSORS_FILE = "tensors.safetensors"
STATE_FILE = "state.json"
_FOLDER = re.compile(r"ckpt-\d+")


class CheckpointError(RecordError):
    """A checkpoint (or run folder) that cannot be loaded as written: ``path`` and the ``problem``.

    A ``RecordError``, so one ``except`` covers every run record that cannot be read.
    """


@contextlib.contextmanager
def _checkpoint_file() -> Iterator[None]:
    """A ``RecordError`` of a checkpoint's file raised as the ``CheckpointError`` of that file."""
    try:
        yield
    except CheckpointError:
        raise
    except RecordError as err:
        raise CheckpointError(err.path, err.problem, err.line) from None


def encode_trajectory(t: Trajectory) -> dict:
    return dataclasses.asdict(t)


def decode_trajectory(d: dict) -> Trajectory:
    steps = [Step(**s) for s in d.pop("steps")]
    return Trajectory(**d, steps=steps)


def _optimizer_tensors(opt: torch.optim.Optimizer, prefix: str) -> tuple[dict[str, torch.Tensor], dict]:
    state = opt.state_dict()
    tensors, scalars = {}, {}
    for idx, slots in state["state"].items():
        for name, value in slots.items():
            key = f"{prefix}.{idx}.{name}"
            if torch.is_tensor(value):
                tensors[key] = value.detach().clone().contiguous()
            else:
                scalars[key] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def _load_optimizer(opt: torch.optim.Optimizer, prefix: str, tensors: dict, meta: dict) -> None:
    state: dict[int, dict[str, Any]] = {}
    for key, value in [*tensors.items(), *meta["scalars"].items()]:
        head, idx, name = key.rsplit(".", 2)
        if head == prefix:
            state.setdefault(int(idx), {})[name] = value
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def _check_finite(iteration: int, tensors: dict[str, torch.Tensor], checked: set[str]) -> None:
    """Refuse to save a non-finite parameter or optimizer moment (the keys in ``checked``)."""
    for key in sorted(checked):
        t = tensors[key]
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise FloatingPointError(
                f"not checkpointing iteration {iteration}: {key} holds non-finite values "
                f"({int((~torch.isfinite(t)).sum())} of {t.numel()})"
            )


def save_checkpoint(
    run_dir: Path,
    iteration: int,
    modules: dict[str, torch.nn.Module],
    optimizers: dict[str, torch.optim.Optimizer],
    state: dict,
    trajectories: dict[str, list[Trajectory]],
    keep: int = 2,
) -> Path:
    """Write ``run_dir/ckpt-<iteration>`` atomically; keep the newest ``keep`` checkpoints.

    A parameter or optimizer moment that is not finite raises ``FloatingPointError`` before anything
    is written: the run's last checkpoint stays the newest.
    """
    run_dir = Path(run_dir)
    tensors: dict[str, torch.Tensor] = {}
    checked: set[str] = set()
    for name, module in modules.items():
        for key, value in module.state_dict().items():
            tensors[f"module.{name}.{key}"] = value.detach().clone().contiguous()
        checked |= {f"module.{name}.{key}" for key, _ in module.named_parameters()}
    opt_meta = {}
    for name, opt in optimizers.items():
        t, meta = _optimizer_tensors(opt, f"optim.{name}")
        tensors |= t
        checked |= set(t)
        opt_meta[name] = meta
    _check_finite(iteration, tensors, checked & set(tensors))
    digests = {key: tensor_digest(value) for key, value in tensors.items()}

    final = run_dir / f"ckpt-{iteration:05d}"
    tmp = run_dir / f"ckpt-{iteration:05d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(tensors, str(tmp / TENSORS_FILE))
    record = {**state, "optimizers": opt_meta, "tensors_sha256": digests}
    (tmp / STATE_FILE).write_text(json.dumps(record, default=float))
    for name, trajs in trajectories.items():
        with gzip.open(tmp / f"{name}.json.gz", "wt") as f:
            json.dump([encode_trajectory(t) for t in trajs], f, default=str)
    aside = final.with_name(final.name + ".old")
    shutil.rmtree(aside, ignore_errors=True)
    if final.exists():  # saved again: the old copy stays readable until the new one is in place
        final.rename(aside)
    tmp.rename(final)
    atomic_write_text(run_dir / "latest", final.name)
    shutil.rmtree(aside, ignore_errors=True)
    complete = sorted(d for d in run_dir.glob("ckpt-[0-9]*") if d.is_dir() and d.name[5:].isdigit())
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def checkpoints(run_dir: Path) -> list[Path]:
    """A run's complete checkpoint folders, newest first (``ckpt-<k>.old`` where ``ckpt-<k>`` is gone:
    killed while iteration k was saved again)."""
    found: dict[str, Path] = {}
    for d in Path(run_dir).glob("ckpt-[0-9]*"):
        stem, _, suffix = d.name.partition(".")
        complete = d.is_dir() and _FOLDER.fullmatch(stem) and suffix in ("", "old")
        if complete and (suffix == "" or stem not in found):
            found[stem] = d
    return [found[k] for k in sorted(found, reverse=True)]


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``run_dir/latest`` names; None in a run without checkpoints.

    A ``latest`` that is missing, unreadable or names no checkpoint folder falls back to the newest
    folder there, with a warning that says so (a run is never silently started over).
    """
    run_dir = Path(run_dir)
    pointer = run_dir / "latest"
    try:
        name = pointer.read_text().strip()
    except FileNotFoundError:
        problem = "is missing"
    except (OSError, UnicodeDecodeError) as err:
        problem = f"cannot be read ({type(err).__name__})"
    else:
        folder = run_dir / name
        if _FOLDER.fullmatch(name):
            if folder.is_dir():
                return folder
            aside = folder.with_name(folder.name + ".old")  # killed while the same iteration was saved again
            if aside.is_dir():
                return aside
        problem = f"names {name[:40]!r}, which is not a checkpoint folder there"
    found = checkpoints(run_dir)
    if not found:
        return None
    warnings.warn(f"{pointer} {problem}; using {found[0]}, the newest checkpoint there", stacklevel=2)
    return found[0]


def _read_state(folder: Path, keys: Iterable[str]) -> dict:
    """``state.json`` of ``folder``: a JSON object with the optimizers' state and every one of ``keys``."""
    path = folder / STATE_FILE
    if not path.is_file():
        raise CheckpointError(path, "is missing")
    with _checkpoint_file():
        return dict(require_keys(read_json(path), ("optimizers", *keys), path))


def _read_tensors(folder: Path, digests: dict[str, str] | None) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors, each checked against the digest ``state.json`` records for it."""
    path = folder / TENSORS_FILE
    if not path.is_file():
        raise CheckpointError(path, "is missing")
    try:
        tensors = load_file(str(path))
    except Exception as err:  # safetensors raises its own error types (SafetensorError) for damaged files
        raise CheckpointError(
            path, f"truncated or damaged safetensors file ({type(err).__name__}: {err})"
        ) from None
    if digests is None:  # written before checkpoints carried digests: names are still checked on load
        warnings.warn(
            f"{folder / STATE_FILE} records no tensor digests: {path} is loaded unverified", stacklevel=3
        )
        return tensors
    missing, extra = sorted(set(digests) - set(tensors)), sorted(set(tensors) - set(digests))
    if missing:
        raise CheckpointError(
            path, f"{', '.join(missing)}: recorded in {folder / STATE_FILE} but missing here"
        )
    if extra:
        raise CheckpointError(path, f"{', '.join(extra)}: here but not recorded in {folder / STATE_FILE}")
    for key in sorted(tensors):
        if tensor_digest(tensors[key]) != digests[key]:
            raise CheckpointError(path, f"tensor {key} does not match its digest: the file is damaged")
    return tensors


def _module_tensors(path: Path, name: str, module: torch.nn.Module, tensors: dict) -> dict:
    """Module ``name``'s own tensors of the checkpoint; a missing or an extra one is an error naming it."""
    prefix = f"module.{name}."
    own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    wanted = set(module.state_dict())
    missing, extra = sorted(wanted - set(own)), sorted(set(own) - wanted)
    if missing:
        names = ", ".join(prefix + k for k in missing)
        raise CheckpointError(path, f"{names}: missing from the checkpoint (module {name!r} has it)")
    if extra:
        names = ", ".join(prefix + k for k in extra)
        raise CheckpointError(path, f"{names}: in the checkpoint but not a tensor of module {name!r}")
    return own


def load_checkpoint(
    folder: Path,
    modules: dict[str, torch.nn.Module],
    optimizers: dict[str, torch.optim.Optimizer],
    state_keys: Iterable[str] = (),
) -> tuple[dict, dict[str, list[Trajectory]]]:
    """Restore modules and optimizers in place; return the JSON state and stored trajectory lists.

    Everything is read and checked before a module changes; a damaged or incomplete checkpoint (also
    a ``state.json`` without one of ``state_keys``) raises ``CheckpointError`` naming the file (and
    the tensor) and what is wrong with it.
    """
    folder = Path(folder)
    state = _read_state(folder, state_keys)
    tensors = _read_tensors(folder, state.pop("tensors_sha256", None))
    path = folder / TENSORS_FILE
    own = {name: _module_tensors(path, name, module, tensors) for name, module in modules.items()}
    meta = state["optimizers"]
    absent = [name for name in optimizers if name not in meta]
    if absent:
        raise CheckpointError(folder / STATE_FILE, f"has no state of optimizer(s) {', '.join(absent)}")
    trajectories = {}
    for traj_path in sorted(folder.glob("*.json.gz")):
        with _checkpoint_file():
            stored = read_json_gz(traj_path)
        try:
            trajectories[traj_path.name[: -len(".json.gz")]] = [decode_trajectory(d) for d in stored]
        except (AttributeError, TypeError, KeyError) as err:
            problem = f"not a list of trajectories ({type(err).__name__}: {err})"
            raise CheckpointError(traj_path, problem) from None
    for name, module in modules.items():
        module.load_state_dict(own[name])
    for name, opt in optimizers.items():
        _load_optimizer(
            opt,
            f"optim.{name}",
            {k: v for k, v in tensors.items() if k.startswith(f"optim.{name}.")},
            meta[name],
        )
    return state, trajectories
