"""The WebShop reward against hand-computed cases, and the option vocabulary it relies on."""

from __future__ import annotations

import pytest

from rspo_kit.envs.webshop.catalogue import Product, load_ontology, product_types
from rspo_kit.envs.webshop.goals import Goal
from rspo_kit.envs.webshop.reward import (
    attribute_matches,
    normalize_color,
    option_matches,
    query_coverage,
    score_purchase,
    type_reward,
)

# What a goal shares with the product it was made from: the id, query and place in the catalogue.
LIPSTICK = dict(
    asin="B0TESTTEST",
    query="lipstick",
    product_category="Beauty & Personal Care › Makeup › Lips › Lipstick",
    product_type="lipstick",
    type_nouns=("lipstick",),
)


def product(**overrides) -> Product:
    fields = dict(
        title="Lumira Long Lasting Lipstick, Cruelty Free, Vegan Formula",
        description="A lipstick that is paraben free.",
        bullets=("Easy to apply: every day.",),
        price=19.99,
        options={"color": ("ruby", "gray"), "size": ("large", "x-large")},
        attributes=("long lasting", "cruelty free", "vegan formula"),
        category="beauty",
    )
    return Product(**{**LIPSTICK, **fields, **overrides})


def goal(**overrides) -> Goal:
    fields = dict(
        instruction="i need a long lasting lipstick",
        attributes=("long lasting", "cruelty free"),
        goal_options={"color": "ruby", "size": "large"},
        price_upper=30.0,
        name="Lumira Long Lasting Lipstick",
    )
    return Goal(**{**LIPSTICK, **fields, **overrides})


def test_everything_right_scores_one():
    parts = score_purchase(product(), goal(), {"color": "ruby", "size": "large"})
    assert parts.reward == 1.0 and parts.r_type == 1.0
    assert (parts.attr_matches, parts.option_matches, parts.price_ok) == (2, 2, True)


def test_type_mismatch_zeroes_the_reward_even_if_everything_else_matches():
    mascara = product(
        query="mascara",
        product_category="Beauty & Personal Care › Makeup › Eyes › Mascara",
        product_type="mascara",
        type_nouns=("mascara",),
    )
    parts = score_purchase(mascara, goal(), {"color": "ruby", "size": "large"})
    # the breadcrumbs share two levels, but a noun overlap of 0 overrides that (original rule order)
    assert parts.category_match and parts.title_score == 0.0
    assert parts.r_type == 0.0 and parts.reward == 0.0


@pytest.mark.parametrize(
    ("nouns", "query", "crumbs", "expected"),
    [
        (("hair", "oil"), "hair oil", "Beauty › Hair Care › Oils", 1.0),  # overlap 1/2 > 0.2
        (("x", "b"), "other", "Other › Place", 0.5),  # overlap 1/5 = 0.2: not > 0.2, no query/category
        (("x", "b"), "lipstick", "Other › Place", 1.0),  # same query rescues the 0.2 overlap
        (("q",) * 1, "lipstick", "Other › Place", 0.0),  # overlap 0 overrides the query match
    ],
)
def test_type_reward_rules(nouns, query, crumbs, expected):
    g = goal(type_nouns=("hair", "extension") if "hair" in nouns else ("a", "b", "c", "d", "e"))
    p = product(type_nouns=nouns, query=query, product_category=crumbs)
    assert type_reward(p, g)[0] == expected


def test_title_score_below_a_tenth_gives_point_one():
    g = goal(type_nouns=tuple("abcdefghijk"))  # 11 nouns, one shared: 1/11 < 0.1
    p = product(type_nouns=("a",), query="other", product_category="X › Y")
    r_type, title_score, _, _ = type_reward(p, g)
    assert title_score == pytest.approx(1 / 11) and r_type == 0.1


def test_partial_attributes_fuzzy_substring_and_missing():
    g = goal(attributes=("long lasting", "paraben free", "sulfate free"), goal_options={"color": "ruby"})
    # "long lasting": fuzzy hit among attributes; "paraben free": in the description; "sulfate free": nowhere
    assert attribute_matches(product(), g.attributes) == 2
    parts = score_purchase(product(), g, {"color": "ruby"})
    assert parts.reward == pytest.approx((2 + 1 + 1) / (3 + 1 + 1))


def test_wrong_size_is_not_close_enough():
    parts = score_purchase(product(), goal(), {"color": "ruby", "size": "x-large"})
    assert parts.option_matches == 1
    assert parts.reward == pytest.approx((2 + 1 + 1) / (2 + 2 + 1))


def test_price_over_the_limit():
    parts = score_purchase(product(price=31.0), goal(), {"color": "ruby", "size": "large"})
    assert not parts.price_ok and parts.reward == pytest.approx(4 / 5)


def test_nothing_selected_and_everything_wrong():
    g = goal(attributes=("sulfate free",))
    parts = score_purchase(product(price=99.0), g, {})
    assert parts.reward == 0.0 and parts.n_options == 2


def test_colours_are_normalised_and_containment_counts():
    assert normalize_color("Grey") == "gray" and normalize_color("Navy Blue") == "navy"
    assert normalize_color("sea salt") == "sea salt"
    assert option_matches({"color": "grey"}, {"color": "gray"}) == 1
    assert option_matches({"color": "charcoal heather"}, {"color": "gray"}) == 1
    assert option_matches({"flavor": "smoky barbecue"}, {"flavor": "barbecue"}) == 1  # contained
    assert option_matches({"color": "ruby"}, {"color": "plum"}) == 0
    assert option_matches({"size": "Large "}, {"size": "large"}) == 1  # exact after trimming/casing


def test_option_values_of_an_axis_never_match_each_other():
    """Otherwise a wrong option would earn full reward on our own catalogue."""
    onto = load_ontology()
    for t in product_types(onto):
        for axis in t["axes"]:
            values = t.get("values", {}).get(axis) or onto["categories"][t["category"]]["options"][axis]
            for a in values:
                for b in values:
                    if a != b:
                        assert option_matches({axis: a}, {axis: b}) == 0, (t["name"], axis, a, b)


def test_query_coverage_counts_type_and_attribute_words():
    g = goal()  # words: lipstick, long, lasting, cruelty, free
    assert query_coverage("", g) == 0.0
    assert query_coverage("long lasting lipstick", g) == pytest.approx(3 / 5)
    assert query_coverage("Cruelty-free long lasting LIPSTICK please", g) == 1.0
