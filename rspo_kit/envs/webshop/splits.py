"""Fixed WebShop split manifests (``data/webshop/splits/*.jsonl``, one goal per line).

* ``train`` — 3000 goals on the *seen* product types (80 of 100), one per product;
* ``eval`` — 200 goals on seen types, from products that train never uses;
* ``eval_unseen`` — 200 goals on the 20 held-out types (4 per category), which train never uses.

Task order interleaves the categories, so the first ``n`` tasks cover all of them. The manifests are
committed; ``python -m rspo_kit.envs.webshop.splits`` rewrites them (byte for byte the same).

With official catalogue files (``RSPO_WEBSHOP_ITEMS``) the manifests do not apply; goals are then
synthesised from the loaded products that carry an instruction, with the same split rules over their
``query`` field.
"""

from __future__ import annotations

import json
import os
import random
from functools import cache
from pathlib import Path

from rspo_kit.envs.base import Task
from rspo_kit.envs.webshop.catalogue import Catalogue, load_catalogue, load_ontology, product_types
from rspo_kit.envs.webshop.goals import Goal, make_goal
from rspo_kit.paths import atomic_write_text, data_dir, read_split_manifest

SPLIT_SIZES = {"train": 3000, "eval": 200, "eval_unseen": 200}
UNSEEN_PER_CATEGORY = 4


def manifest_path(split: str) -> Path:
    return data_dir() / "webshop" / "splits" / f"{split}.jsonl"


def unseen_types(type_names_by_category: dict[str, list[str]]) -> frozenset[str]:
    rng = random.Random("rspo_kit-webshop-unseen-types")
    return frozenset(
        t
        for cat in sorted(type_names_by_category)
        for t in rng.sample(type_names_by_category[cat], UNSEEN_PER_CATEGORY)
    )


def _interleave(groups: dict[str, list], n: int) -> list:
    """Round-robin over the groups (sorted keys) until ``n`` items are taken."""
    out, pos = [], 0
    keys = sorted(groups)
    while len(out) < n:
        key = keys[pos % len(keys)]
        if groups[key]:
            out.append(groups[key].pop())
        pos += 1
        if not any(groups.values()):
            break
    return out


def build_goals(catalogue: Catalogue, by_category: dict[str, list[str]]) -> dict[str, list[Goal]]:
    """Goals of every split for a catalogue, given its product types per category."""
    hidden = unseen_types(by_category)
    rng = random.Random("rspo_kit-webshop-splits")
    usable = [p for p in catalogue.products if p.instruction]
    seen = [p for p in usable if p.product_type not in hidden]
    unseen = [p for p in usable if p.product_type in hidden]
    rng.shuffle(seen)
    rng.shuffle(unseen)
    category_of = {t: c for c, ts in by_category.items() for t in ts}

    def grouped(products):
        groups: dict[str, list] = {}
        for p in products:
            groups.setdefault(category_of.get(p.product_type, p.category), []).append(p)
        return groups

    eval_products = _interleave(grouped(seen), SPLIT_SIZES["eval"])
    taken = {p.asin for p in eval_products}
    train_products = _interleave(grouped([p for p in seen if p.asin not in taken]), SPLIT_SIZES["train"])
    unseen_products = _interleave(grouped(unseen), SPLIT_SIZES["eval_unseen"])
    return {
        split: [make_goal(p, rng) for p in products]
        for split, products in (
            ("train", train_products),
            ("eval", eval_products),
            ("eval_unseen", unseen_products),
        )
    }


def write_manifests() -> None:
    by_category: dict[str, list[str]] = {}
    for t in product_types(load_ontology()):
        by_category.setdefault(t["category"], []).append(t["name"])
    for split, goals in build_goals(load_catalogue(), by_category).items():
        rows = [
            json.dumps({"id": f"webshop/{split}/{i:04d}", **g.to_manifest()}, sort_keys=True)
            for i, g in enumerate(goals)
        ]
        atomic_write_text(manifest_path(split), "\n".join(rows) + "\n")


@cache
def _generated_tasks(split: str) -> tuple[Task, ...]:
    text = read_split_manifest(manifest_path(split), "rspo_kit.envs.webshop.splits")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return tuple(
        Task(env="webshop", id=r["id"], split=split, kind=r["product_type"], meta={"goal": r}) for r in rows
    )


@cache
def _official_tasks(items_path: str, split: str) -> tuple[Task, ...]:
    catalogue = load_catalogue()
    by_category: dict[str, list[str]] = {}
    for p in catalogue.products:
        if p.product_type not in by_category.setdefault(p.category, []):
            by_category[p.category].append(p.product_type)
    by_category = {c: ts for c, ts in by_category.items() if len(ts) > UNSEEN_PER_CATEGORY}
    goals = build_goals(catalogue, by_category)[split]
    return tuple(
        Task(
            env="webshop",
            id=f"webshop-official/{split}/{i:04d}",
            split=split,
            kind=g.product_type,
            meta={"goal": {"id": f"webshop-official/{split}/{i:04d}", **g.to_manifest()}},
        )
        for i, g in enumerate(goals)
    )


def webshop_tasks(split: str) -> list[Task]:
    if split not in SPLIT_SIZES:
        raise ValueError(f"webshop split must be one of {tuple(SPLIT_SIZES)}, got {split!r}")
    items = os.environ.get("RSPO_WEBSHOP_ITEMS")
    return list(_official_tasks(items, split) if items else _generated_tasks(split))


if __name__ == "__main__":
    write_manifests()
    for split in SPLIT_SIZES:
        print(split, len(webshop_tasks(split)), "goals ->", manifest_path(split))
