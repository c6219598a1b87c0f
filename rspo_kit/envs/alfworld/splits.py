"""Fixed ALFWorld split manifests (``data/alfworld/splits/*.json``) and official-data discovery.

Splits, so that every run on every machine evaluates on the same tasks:

* ``train`` — 3000 tasks (500 per task type) on the *seen* layouts 0-39 of each room;
* ``eval`` — 120 tasks (20 per type) on seen layouts, with task seeds never used in train;
* ``eval_unseen`` — 120 tasks (20 per type) on layouts 40-49, which train never uses.

Task order interleaves the six types, so the first ``n`` tasks of a split cover all of them.
The manifests are committed; ``python -m rspo_kit.envs.alfworld.splits`` rewrites them (it must
reproduce the committed files byte for byte).

If ``ALFWORLD_DATA`` points at the official ALFWorld data (``json_2.1.1/``), its train / valid_seen /
valid_unseen games stand in for train / eval / eval_unseen through the same code path.
"""

from __future__ import annotations

import json
import os
import random
from functools import cache
from pathlib import Path

from rspo_kit.envs.alfworld.scenes import TASK_ROOMS, TASK_TYPES, TaskSpec, generate_scene
from rspo_kit.envs.base import Task
from rspo_kit.paths import atomic_write_text, data_dir, read_split_manifest

SEEN_LAYOUTS = range(0, 40)
UNSEEN_LAYOUTS = range(40, 50)
SPLIT_SIZES = {"train": 500, "eval": 20, "eval_unseen": 20}  # per task type
# Disjoint seed ranges keep eval scenes different from train scenes on the same layouts.
SEED_RANGES = {"train": (0, 10**6), "eval": (10**6, 2 * 10**6), "eval_unseen": (2 * 10**6, 3 * 10**6)}
OFFICIAL_SPLITS = {"train": "train", "eval": "valid_seen", "eval_unseen": "valid_unseen"}


def manifest_path(split: str) -> Path:
    return data_dir() / "alfworld" / "splits" / f"{split}.json"


def build_manifest(split: str) -> list[dict]:
    """Sample a split's task specs, keeping only scenes the generator can build."""
    rng = random.Random(f"rspo_kit-alfworld-split-{split}")
    layouts = UNSEEN_LAYOUTS if split == "eval_unseen" else SEEN_LAYOUTS
    per_type: dict[str, list[dict]] = {}
    for task_type in TASK_TYPES:
        entries, used = [], set()
        while len(entries) < SPLIT_SIZES[split]:
            room = rng.choice(TASK_ROOMS[task_type])
            layout, seed = rng.choice(layouts), rng.randrange(*SEED_RANGES[split])
            if (room, layout, seed) in used:
                continue
            used.add((room, layout, seed))
            spec = TaskSpec(id="probe", task_type=task_type, room=room, layout=layout, seed=seed)
            try:
                generate_scene(spec)
            except ValueError:  # this layout lacks what the task needs (e.g. no lamp stand)
                continue
            entries.append({"task_type": task_type, "room": room, "layout": layout, "seed": seed})
        per_type[task_type] = entries
    interleaved = [per_type[t][i] for i in range(SPLIT_SIZES[split]) for t in TASK_TYPES]
    return [{"id": f"alfworld/{split}/{i:04d}", **e} for i, e in enumerate(interleaved)]


def write_manifests() -> None:
    for split in SPLIT_SIZES:
        rows = [json.dumps(entry, sort_keys=True) for entry in build_manifest(split)]
        text = "[\n" + ",\n".join(rows) + "\n]\n"  # one task per line: small, diffable
        atomic_write_text(manifest_path(split), text)


@cache
def _generated_tasks(split: str) -> tuple[Task, ...]:
    entries = json.loads(read_split_manifest(manifest_path(split), "rspo_kit.envs.alfworld.splits"))
    return tuple(
        Task(env="alfworld", id=e["id"], split=split, kind=e["task_type"], meta={"spec": e}) for e in entries
    )


def official_root() -> Path | None:
    """The official ALFWorld ``json_2.1.1`` folder under ``ALFWORLD_DATA``, if a user provided one."""
    root = os.environ.get("ALFWORLD_DATA")
    if not root:
        return None
    path = Path(root) / "json_2.1.1"
    return path if path.is_dir() else None


@cache
def _official_tasks(root: Path, split: str) -> tuple[Task, ...]:
    tasks = []
    for game in sorted((root / OFFICIAL_SPLITS[split]).glob("*/*/game.tw-pddl")):
        if "movable" in str(game) or "Sliced" in str(game):  # as alfworld: these trajectories are unsupported
            continue
        traj = json.loads((game.parent / "traj_data.json").read_text())
        rel = game.parent.relative_to(root / OFFICIAL_SPLITS[split])
        tasks.append(
            Task(
                env="alfworld",
                id=f"alfworld-official/{split}/{rel}",
                split=split,
                kind=traj["task_type"],
                meta={"game_file": str(game)},
            )
        )
    return tuple(tasks)


def alfworld_tasks(split: str) -> list[Task]:
    if split not in SPLIT_SIZES:
        raise ValueError(f"alfworld split must be one of {tuple(SPLIT_SIZES)}, got {split!r}")
    root = official_root()
    return list(_official_tasks(root, split) if root else _generated_tasks(split))


if __name__ == "__main__":
    write_manifests()
    for split in SPLIT_SIZES:
        print(split, len(json.loads(manifest_path(split).read_text())), "tasks ->", manifest_path(split))
