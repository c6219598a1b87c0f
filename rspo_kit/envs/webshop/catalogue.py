"""The WebShop product catalogue: generated from ``data/webshop/ontology.json``, or the official files.

WebShop's own data (``items_shuffle_1000.json`` + ``items_ins_v2_1000.json``) came from Google Drive and
cannot be installed, so rspo_kit generates a catalogue of 5,000 products (100 product types x 50) from a
small curated ontology. The generated files use the *official* record format (``asin``, ``name``,
``full_description``, ``small_description``, ``pricing``, ``customization_options``, ``category``,
``query``, ``product_category`` in the items file; ``attributes``, ``instruction``,
``instruction_attributes`` per asin in the ins file), so one loader reads both. Two extra item fields,
``product_type`` and ``type_nouns``, replace the spaCy noun tagging of the original reward.

Generated files are cached under ``cache_dir()/webshop/<digest>/`` (the digest covers the ontology and
the generator version). To play on the official files instead, set ``RSPO_WEBSHOP_ITEMS`` (and
optionally ``RSPO_WEBSHOP_ATTRS``) or pass ``items_path=`` / ``attrs_path=`` to ``make_env("webshop")``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from rspo_kit.paths import atomic_write_text, cache_dir, data_dir

GENERATOR_VERSION = "v1"  # bump when generate_records changes what it writes
PRODUCTS_PER_TYPE = 50
_WORD = re.compile(r"[a-z0-9]+")
# Words that never name a product type; used only for official records that lack ``type_nouns``.
_NOT_NOUNS = frozenset(
    [
        "a",
        "an",
        "and",
        "or",
        "the",
        "of",
        "for",
        "with",
        "in",
        "on",
        "to",
        "by",
        "from",
        "at",
        "is",
        "are",
        "be",
        "as",
        "pack",
        "count",
        "set",
        "new",
        "women",
        "men",
        "womens",
        "mens",
        "kids",
        "size",
        "inch",
        "inches",
        "oz",
        "ounce",
        "fl",
        "lb",
        "x",
        "free",
    ]
)


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens, the unit every matcher in the env works on."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Product:
    """One catalogue item, in the processed form the original ``load_products`` builds."""

    asin: str
    title: str
    description: str
    bullets: tuple[str, ...]
    price: float
    options: Mapping[str, tuple[str, ...]]  # option name -> values, both lower-case, page order
    attributes: tuple[str, ...]
    category: str
    query: str
    product_category: str
    product_type: str
    type_nouns: tuple[str, ...]
    rating: str = "N.A."
    reviews: tuple[str, ...] = ()
    instruction: str = ""  # the goal phrase of the ins file ("i need a vegan lipstick"), may be empty
    instruction_attributes: tuple[str, ...] = ()

    @cached_property
    def title_lower(self) -> str:
        return self.title.lower()

    @cached_property
    def bullets_lower(self) -> str:
        return " ".join(self.bullets).lower()

    @cached_property
    def description_lower(self) -> str:
        return self.description.lower()

    @cached_property
    def option_of_value(self) -> dict[str, str]:
        """Option value -> option name (the first name offering it), for clicks on the item page."""
        out: dict[str, str] = {}
        for name, values in self.options.items():
            for value in values:
                out.setdefault(value, name)
        return out


@dataclass(frozen=True, eq=False)  # identity equality: one index per loaded catalogue
class Catalogue:
    products: tuple[Product, ...]
    source: str  # "generated:<digest>" or the items path
    by_asin: Mapping[str, Product] = field(repr=False, compare=False, default_factory=dict)

    def __getitem__(self, asin: str) -> Product:
        return self.by_asin[asin.upper()]

    def __len__(self) -> int:
        return len(self.products)


# ---------------------------------------------------------------------------------------------- ontology


@cache
def load_ontology() -> dict:
    return json.loads((data_dir() / "webshop" / "ontology.json").read_text())


def ontology_digest() -> str:
    """Names the cached catalogue: the ontology, the generator version and this module's source."""
    text = (data_dir() / "webshop" / "ontology.json").read_bytes() + Path(__file__).read_bytes()
    return hashlib.sha256(text + GENERATOR_VERSION.encode()).hexdigest()[:12]


def product_types(ontology: Mapping | None = None) -> list[dict]:
    """All product types in ontology order, each with its ``category`` key added."""
    ontology = ontology or load_ontology()
    return [{**t, "category": key} for key, cat in ontology["categories"].items() for t in cat["types"]]


def _article(phrase: str) -> str:
    if phrase.endswith("s") and not phrase.endswith("ss"):
        return ""  # plural types ("denim jeans") take no article
    return "an " if phrase[0] in "aeiou" else "a "


def _cap(phrase: str) -> str:
    return " ".join(w if any(c.isdigit() for c in w) else w.capitalize() for w in phrase.split())


def generate_records(ontology: Mapping) -> tuple[list[dict], dict[str, dict]]:
    """The catalogue as official-format records: (items, ins keyed by asin). Deterministic."""
    rng = random.Random(f"rspo_kit-webshop-catalogue-{GENERATOR_VERSION}")
    items, ins, used = [], {}, set()
    reviews = ontology["reviews"]
    for type_spec in product_types(ontology):
        cat = ontology["categories"][type_spec["category"]]
        type_name, type_words = type_spec["name"], set(type_spec["name"].split())
        # An attribute that repeats a word of the type ("wireless" earbuds) would read oddly.
        pool = [a for a in cat["attributes"] if not set(a.split()) & type_words]
        for _ in range(PRODUCTS_PER_TYPE):
            asin = "B0" + "".join(rng.choices(string.ascii_uppercase + string.digits, k=8))
            while asin in used:
                asin = "B0" + "".join(rng.choices(string.ascii_uppercase + string.digits, k=8))
            used.add(asin)
            attrs = rng.sample(pool, 3)
            brand = rng.choice(cat["brands"])
            options = {}
            for axis in type_spec["axes"]:
                values = type_spec.get("values", {}).get(axis) or cat["options"][axis]
                picked = sorted(rng.sample(range(len(values)), rng.randint(2, min(5, len(values)))))
                options[axis] = [values[i] for i in picked]
            lo, hi = cat["price"]
            price = rng.randint(lo, hi - 1) + rng.choice([0.99, 0.49, 0.95])
            if rng.random() < 0.5:
                title = f"{brand} {_cap(attrs[0])} {_cap(type_name)}, {_cap(attrs[1])}, {_cap(attrs[2])}"
            else:
                title = (
                    f"{_cap(attrs[0])} and {_cap(attrs[1])} {_cap(type_name)} by {brand} - {_cap(attrs[2])}"
                )
            description = (
                f"This {type_name} from {brand} is {attrs[0]}, {attrs[1]} and {attrs[2]}. "
                f"Part of our {cat['root'].lower()} range, made to be used every day."
            )
            bullets = [f"{a.capitalize()}: a {type_name} you can rely on." for a in attrs]
            bullets.append(f"Sold by {brand}; satisfaction guaranteed.")
            n_goal_attrs = rng.choice([1, 2, 2, 3])
            goal_attrs = rng.sample(attrs, n_goal_attrs)
            listed = (
                goal_attrs[0]
                if len(goal_attrs) == 1
                else f"{', '.join(goal_attrs[:-1])} and {goal_attrs[-1]}"
            )
            phrase = f"{listed} {type_name}"
            instruction = rng.choice(ontology["instruction_templates"]).format(a=_article(phrase) + phrase)
            items.append(
                {
                    "asin": asin,
                    "name": title,
                    "full_description": description,
                    "small_description": bullets,
                    "pricing": f"${price:.2f}",
                    "customization_options": {
                        k: [{"value": v, "image": None} for v in vs] for k, vs in options.items()
                    },
                    "category": type_spec["category"],
                    "query": type_name,
                    "product_category": f"{cat['root']} › {type_spec['path']}",
                    "average_rating": "N.A.",
                    "reviews": [
                        {
                            "title": rng.choice(reviews["titles"]),
                            "score": rng.randint(3, 5),
                            "body": rng.choice(reviews["bodies"]),
                        }
                        for _ in range(2)
                    ],
                    "brand": brand,
                    "product_type": type_name,
                    "type_nouns": type_spec["nouns"],
                }
            )
            ins[asin] = {
                "attributes": attrs,
                "instruction": instruction,
                "instruction_attributes": goal_attrs,
            }
    return items, ins


def generated_paths() -> tuple[Path, Path]:
    """The cached generated catalogue files, written on first use."""
    root = cache_dir() / "webshop" / ontology_digest()
    items_path, ins_path = root / "items.json", root / "items_ins.json"
    if not (items_path.is_file() and ins_path.is_file()):
        items, ins = generate_records(load_ontology())
        atomic_write_text(ins_path, json.dumps(ins))
        atomic_write_text(items_path, json.dumps(items))
    return items_path, ins_path


# ---------------------------------------------------------------------------------------------- loading


def _price(pricing: Any) -> float:
    """The original draws a random price inside a range; we take its low end, so prices are fixed."""
    if isinstance(pricing, (int, float)):
        return float(pricing)
    if isinstance(pricing, list):
        pricing = " ".join(str(p) for p in pricing)
    found = re.findall(r"\d+(?:\.\d+)?", str(pricing).replace(",", ""))
    return float(found[0]) if found else 0.0


def _options(raw: Any) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, values in (raw or {}).items():
        vals = [(v.get("value") if isinstance(v, Mapping) else v) for v in values or []]
        clean = tuple(dict.fromkeys(" ".join(str(v).lower().split()) for v in vals if v))
        if clean:
            out[" ".join(str(name).lower().split())] = clean
    return out


def _fallback_nouns(title: str) -> tuple[str, ...]:
    """Without spaCy: the title's alphabetic words that are not function words (over-counts nouns)."""
    return tuple(dict.fromkeys(w for w in words(title) if w.isalpha() and w not in _NOT_NOUNS))


def product_from_record(rec: Mapping, ins: Mapping | None = None) -> Product:
    extra = (ins or {}).get(rec["asin"], {})
    bullets = rec.get("small_description", rec.get("BulletPoints", [])) or []
    if isinstance(bullets, str):
        bullets = [bullets]
    title = str(rec.get("name", rec.get("Title", "")))
    reviews = tuple(
        f"{r.get('title', '')} ({r.get('score', '')}/5): {r.get('body', '')}"
        if isinstance(r, Mapping)
        else str(r)
        for r in rec.get("reviews", rec.get("Reviews", [])) or []
    )
    return Product(
        asin=str(rec["asin"]).upper(),
        title=title,
        description=str(rec.get("full_description", rec.get("Description", "")) or ""),
        bullets=tuple(str(b) for b in bullets),
        price=_price(rec.get("pricing", rec.get("price", 0.0))),
        options=_options(rec.get("customization_options", rec.get("options"))),
        attributes=tuple(rec.get("Attributes", extra.get("attributes", [])) or ()),
        category=str(rec.get("category", "")),
        query=str(rec.get("query", "")),
        product_category=str(rec.get("product_category", "")),
        product_type=str(rec.get("product_type") or rec.get("query", "")),
        type_nouns=tuple(rec.get("type_nouns") or _fallback_nouns(title)),
        rating=str(rec.get("average_rating", "N.A.")),
        reviews=reviews,
        instruction=str(extra.get("instruction", "") or ""),
        instruction_attributes=tuple(extra.get("instruction_attributes", []) or ()),
    )


def load_catalogue(items_path: str | None = None, attrs_path: str | None = None) -> Catalogue:
    """The catalogue the env plays on (memoised per process and per file pair).

    No paths and no ``RSPO_WEBSHOP_ITEMS``: the generated catalogue. Otherwise the official-format files
    (``RSPO_WEBSHOP_ATTRS`` / ``attrs_path`` is the ``items_ins_v2`` file with the attributes).
    """
    items_path = items_path or os.environ.get("RSPO_WEBSHOP_ITEMS")
    attrs_path = attrs_path or os.environ.get("RSPO_WEBSHOP_ATTRS")
    return _load_catalogue(str(items_path) if items_path else None, str(attrs_path) if attrs_path else None)


@cache
def _load_catalogue(items_path: str | None, attrs_path: str | None) -> Catalogue:
    if items_path:
        source = str(items_path)
    else:
        gen_items, gen_ins = generated_paths()
        items_path, attrs_path, source = str(gen_items), str(gen_ins), f"generated:{ontology_digest()}"
    records = json.loads(Path(items_path).read_text())
    ins = json.loads(Path(attrs_path).read_text()) if attrs_path else {}
    products, seen = [], set()
    for rec in records:
        if not rec.get("asin") or str(rec["asin"]).upper() in seen:
            continue  # the official file repeats some asins; the first record wins, as in load_products
        seen.add(str(rec["asin"]).upper())
        products.append(product_from_record(rec, ins))
    return Catalogue(tuple(products), source, {p.asin: p for p in products})
