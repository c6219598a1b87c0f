"""The WebShop purchase reward, ported from the original ``web_agent_site/engine/goal.py``.

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[price <= price_upper]) / (|U_att| + |U_opt| + 1)

All functions are pure. Two deliberate departures from the original, both named in the issue:

* spaCy's noun tags of the two titles are replaced by each product's explicit ``type_nouns``;
* options: a ``size`` must match exactly (fuzzy matching calls ``"x-large"`` and ``"large"`` close), and
  a goal value contained in a selected value counts as a match (the substring fallback).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from rapidfuzz import fuzz

from rspo_kit.envs.webshop.catalogue import Product, load_ontology, words
from rspo_kit.envs.webshop.goals import Goal

FUZZY_THRESHOLD = 85  # original: fuzz.token_set_ratio(...) > 85
EXACT_OPTION_NAMES = frozenset({"size"})


@dataclass(frozen=True)
class RewardParts:
    """Why a purchase scored what it did (``info["reward_parts"]`` holds it as a dict)."""

    reward: float
    r_type: float
    attr_matches: int
    n_attrs: int
    option_matches: int
    n_options: int
    price_ok: bool
    title_score: float  # share of the goal's type nouns found in the bought product's
    query_match: bool
    category_match: bool


@cache
def _colour_table() -> tuple[dict[str, str], tuple[str, ...]]:
    onto = load_ontology()
    return dict(onto["color_synonyms"]), tuple(onto["colors"])


def normalize_color(value: str) -> str:
    """Map a colour phrase to its base colour (``"navy blue"`` -> ``"navy"``); other text unchanged.

    Like the original ``normalize_color``: the first known colour in the string wins, here by whole word.

    >>> normalize_color("Grey Heather")
    'gray'
    """
    synonyms, colours = _colour_table()
    text = " ".join(value.lower().split())
    for phrase, base in synonyms.items():
        if f" {phrase} " in f" {text} ":
            return base
    tokens = set(text.split())
    for colour in colours:
        if colour in tokens:
            return colour
    return text


def type_reward(product: Product, goal: Goal) -> tuple[float, float, bool, bool]:
    """(r_type, title_score, query_match, category_match), with the original's rule order.

    1.0 if the query or >= 2 breadcrumb levels match or title_score > 0.2, else 0.5; then 0.1 if
    title_score < 0.1 and 0.0 if it is 0 (the noun overlap overrides the query and category checks).
    """
    query_match = product.query == goal.query
    mine = {c.strip() for c in product.product_category.split("›")}
    theirs = {c.strip() for c in goal.product_category.split("›")}
    category_match = len(mine & theirs) >= 2
    wanted = set(goal.type_nouns)
    title_score = len(set(product.type_nouns) & wanted) / len(wanted) if wanted else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, title_score, query_match, category_match


def attribute_matches(product: Product, goal_attributes: tuple[str, ...]) -> int:
    """Goal attributes found fuzzily among the product's attributes, else verbatim in its texts."""
    count = 0
    for wanted in goal_attributes:
        if any(fuzz.token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes) or (
            wanted in product.title_lower
            or wanted in product.bullets_lower
            or wanted in product.description_lower
        ):
            count += 1
    return count


def option_matches(selected: Mapping[str, str], goal_options: Mapping[str, str]) -> int:
    """Goal options met by the selected ones: sizes exactly, the rest fuzzily or by containment.

    >>> option_matches({"size": "x-large", "color": "navy blue"}, {"size": "large", "color": "navy"})
    1
    """
    count = 0
    loose = [normalize_color(v) for name, v in selected.items() if name not in EXACT_OPTION_NAMES]
    for name, wanted in goal_options.items():
        if name in EXACT_OPTION_NAMES:
            count += selected.get(name, "").strip().lower() == wanted.strip().lower()
            continue
        target = normalize_color(wanted)
        count += any(fuzz.token_set_ratio(have, target) > FUZZY_THRESHOLD or target in have for have in loose)
    return count


def score_purchase(product: Product, goal: Goal, selected: Mapping[str, str]) -> RewardParts:
    """The reward of buying ``product`` with the ``selected`` options (name -> value) for ``goal``."""
    r_type, title_score, query_match, category_match = type_reward(product, goal)
    n_att, n_opt = attribute_matches(product, goal.attributes), option_matches(selected, goal.goal_options)
    price_ok = product.price <= goal.price_upper
    total = (n_att + n_opt + price_ok) / (len(goal.attributes) + len(goal.goal_options) + 1)
    return RewardParts(
        reward=r_type * total,
        r_type=r_type,
        attr_matches=n_att,
        n_attrs=len(goal.attributes),
        option_matches=n_opt,
        n_options=len(goal.goal_options),
        price_ok=price_ok,
        title_score=title_score,
        query_match=query_match,
        category_match=category_match,
    )


def query_coverage(query: str, goal: Goal) -> float:
    """Share of the goal's type and attribute words that the query contains (a progress signal)."""
    wanted = set(words(goal.product_type)) | {w for a in goal.attributes for w in words(a)}
    return len(wanted & set(words(query))) / len(wanted) if wanted else 0.0
