"""WebShop goals: what the shopper asked for, built like the original synthetic goals.

A goal is a target product's instruction phrase, one value per option axis of that product and a price
limit: ``"i need a vegan lipstick with color: ruby, and price lower than 30.00 dollars"``. As in the
original ``get_synthetic_goals``, the limit is the larger of two multiples of 10 drawn from the first
four above the product's price. The reward never looks at the target asin: any product that satisfies
the goal scores 1.0.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from rspo_kit.envs.webshop.catalogue import Catalogue, Product

PRICE_STEPS = [10.0 * i for i in range(1, 1000)]


@dataclass(frozen=True)
class Goal:
    asin: str  # the product the goal was made from (not needed to score 1.0)
    instruction: str
    attributes: tuple[str, ...]
    goal_options: Mapping[str, str]  # option name -> wanted value, lower-case
    price_upper: float
    query: str  # the target's fields that the type check of the reward compares
    name: str
    product_category: str
    product_type: str
    type_nouns: tuple[str, ...]

    def to_manifest(self) -> dict:
        """The compact manifest row; the rest is looked up in the catalogue by asin."""
        return {
            "asin": self.asin,
            "attributes": list(self.attributes),
            "goal_options": dict(self.goal_options),
            "price_upper": self.price_upper,
            "instruction": self.instruction,
            "product_type": self.product_type,
        }

    @classmethod
    def from_manifest(cls, row: Mapping, catalogue: Catalogue) -> Goal:
        target = catalogue[row["asin"]]
        return cls(
            asin=target.asin,
            instruction=row["instruction"],
            attributes=tuple(row["attributes"]),
            goal_options=dict(row["goal_options"]),
            price_upper=float(row["price_upper"]),
            query=target.query,
            name=target.title,
            product_category=target.product_category,
            product_type=target.product_type,
            type_nouns=target.type_nouns,
        )


def price_limit(price: float, rng: random.Random) -> float:
    """Larger of two draws from the first four multiples of 10 above ``price`` (original behaviour)."""
    above = [p for p in PRICE_STEPS if p > price][:4]
    return max(rng.sample(above, 2))


def make_goal(product: Product, rng: random.Random) -> Goal:
    """One synthetic goal for ``product``: a random option combination and a price limit."""
    options = {name: rng.choice(values) for name, values in sorted(product.options.items())}
    upper = price_limit(product.price, rng)
    phrase = product.instruction or f"i am looking for {product.product_type}"
    option_text = ", and ".join(f"{k}: {v}" for k, v in options.items())
    instruction = phrase + (f" with {option_text}" if option_text else "")
    instruction += f", and price lower than {upper:.2f} dollars"
    return Goal(
        asin=product.asin,
        instruction=instruction,
        attributes=product.instruction_attributes or product.attributes[:2],
        goal_options=options,
        price_upper=upper,
        query=product.query,
        name=product.title,
        product_category=product.product_category,
        product_type=product.product_type,
        type_nouns=product.type_nouns,
    )
