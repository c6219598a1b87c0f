"""Checkpoints: safetensors for every tensor (weights, optimizer moments), JSON for the rest.

A checkpoint is a folder ``ckpt-<iteration>`` written as ``ckpt-<iteration>.tmp`` and renamed when
complete; the file ``latest`` names the newest complete one (written atomically too). A kill at any
moment leaves the previous checkpoint intact, also when the same iteration is saved again (a
finished run that adds evaluations): the old folder steps aside as ``ckpt-<iteration>.old`` until
the new one is in place, and ``latest_checkpoint`` finds it there. Nothing is unpickled on load:
tensors come from safetensors, everything else from JSON (replay trajectories as gzipped JSON).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from rspo_kit.paths import atomic_write_text
from rspo_kit.policy.rollout import Step, Trajectory


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


def save_checkpoint(
    run_dir: Path,
    iteration: int,
    modules: dict[str, torch.nn.Module],
    optimizers: dict[str, torch.optim.Optimizer],
    state: dict,
    trajectories: dict[str, list[Trajectory]],
    keep: int = 2,
) -> Path:
    """Write ``run_dir/ckpt-<iteration>`` atomically; keep the newest ``keep`` checkpoints."""
    run_dir = Path(run_dir)
    final = run_dir / f"ckpt-{iteration:05d}"
    tmp = run_dir / f"ckpt-{iteration:05d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tensors: dict[str, torch.Tensor] = {}
    for name, module in modules.items():
        for key, value in module.state_dict().items():
            tensors[f"module.{name}.{key}"] = value.detach().clone().contiguous()
    opt_meta = {}
    for name, opt in optimizers.items():
        t, meta = _optimizer_tensors(opt, f"optim.{name}")
        tensors |= t
        opt_meta[name] = meta
    save_file(tensors, str(tmp / "tensors.safetensors"))
    (tmp / "state.json").write_text(json.dumps({**state, "optimizers": opt_meta}, default=float))
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


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = Path(run_dir) / "latest"
    if not pointer.exists():
        return None
    folder = Path(run_dir) / pointer.read_text().strip()
    if folder.is_dir():
        return folder
    aside = folder.with_name(folder.name + ".old")  # killed while the same iteration was saved again
    return aside if aside.is_dir() else None


def load_checkpoint(
    folder: Path, modules: dict[str, torch.nn.Module], optimizers: dict[str, torch.optim.Optimizer]
) -> tuple[dict, dict[str, list[Trajectory]]]:
    """Restore modules and optimizers in place; return the JSON state and stored trajectory lists."""
    tensors = load_file(str(Path(folder) / "tensors.safetensors"))
    for name, module in modules.items():
        prefix = f"module.{name}."
        own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        module.load_state_dict(own)
    state = json.loads((Path(folder) / "state.json").read_text())
    for name, opt in optimizers.items():
        _load_optimizer(
            opt,
            f"optim.{name}",
            {k: v for k, v in tensors.items() if k.startswith(f"optim.{name}.")},
            state["optimizers"][name],
        )
    trajectories = {}
    for path in Path(folder).glob("*.json.gz"):
        with gzip.open(path, "rt") as f:
            trajectories[path.name[: -len(".json.gz")]] = [decode_trajectory(d) for d in json.load(f)]
    return state, trajectories
