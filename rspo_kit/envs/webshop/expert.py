"""A WebShop expert that acts only on what a shopper sees: the instruction and the current page.

It reads the instruction (what is wanted, the options, the price limit), searches for it, scans the
results pages for a title with every wanted word at an acceptable price, opens that item, and buys it
once each wanted option is offered and selected. An item that lacks an option is remembered as
rejected and the expert goes back to the results. Its transcripts are SFT demonstrations, so it never
peeks at the target asin or at hidden product fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rspo_kit.envs.webshop.catalogue import words
from rspo_kit.envs.webshop.pages import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE, PageView, ShopState

_PRICE = re.compile(r",? and price lower than ([\d.]+) dollars\s*$")
_OPTION = re.compile(r"([a-z][a-z ]*?): (.+)")
_PREFIXES = (
    "i am looking for", "i need", "i want", "find me", "i'm searching for", "can you find me",
    "i would like", "please get me", "i'm looking for",
)  # fmt: skip
_FILLER = frozenset({"a", "an", "and", "the", "some"})


@dataclass(frozen=True)
class ParsedInstruction:
    wanted: str  # "vegan and long lasting lipstick"
    options: dict[str, str]
    price_upper: float

    @property
    def wanted_words(self) -> frozenset[str]:
        return frozenset(w for w in words(self.wanted) if w not in _FILLER)


def parse_instruction(instruction: str) -> ParsedInstruction:
    """Split an instruction into what is wanted, the options and the price limit.

    >>> parse_instruction("i need a vegan lipstick with color: ruby, and price lower than 30.00 dollars")
    ParsedInstruction(wanted='vegan lipstick', options={'color': 'ruby'}, price_upper=30.0)
    """
    text = " ".join(instruction.lower().split())
    price = _PRICE.search(text)
    upper = float(price.group(1)) if price else float("inf")
    text = text[: price.start()] if price else text
    wanted, _, option_text = text.partition(" with ")
    options = {}
    for part in option_text.split(", and ") if option_text else []:
        m = _OPTION.fullmatch(part.strip())
        if m:
            options[m.group(1)] = m.group(2).strip()
    for prefix in _PREFIXES:
        if wanted.startswith(prefix + " "):
            wanted = wanted[len(prefix) + 1 :]
            break
    wanted = " ".join(w for w in wanted.split() if w not in ("a", "an"))
    return ParsedInstruction(wanted, options, upper)


@dataclass
class Expert:
    """The expert's policy; its only memory is the items it opened and turned down."""

    instruction: str
    rejected: set[str] = field(default_factory=set)
    settled: str = ""  # the item bought as a last resort when nothing on the pages suits

    def __post_init__(self) -> None:
        self.goal = parse_instruction(self.instruction)
        self.query = " ".join([self.goal.wanted, *self.goal.options.values()])

    def suits(self, title: str, price: float) -> bool:
        return self.goal.wanted_words <= set(words(title)) and price <= self.goal.price_upper

    def act(self, state: ShopState, view: PageView) -> str:
        back = f"click[{BACK_TO_SEARCH.lower()}]"
        if state.kind == "search":
            return f"search[{self.query}]"
        if state.kind == "sub":
            return f"click[{PREV_PAGE.lower()}]"
        if state.kind == "results":
            if state.query != self.query:
                return back  # someone else's search: start ours
            for product in view.results:
                if product.asin not in self.rejected and self.suits(product.title, product.price):
                    return f"click[{product.asin.lower()}]"
            if NEXT_PAGE.lower() in view.clickables:
                return f"click[{NEXT_PAGE.lower()}]"
            return self._fallback(view)
        product = view.product  # item page
        offered = set(view.clickables)
        suitable = self.suits(product.title, product.price) and all(
            v in offered for v in self.goal.options.values()
        )
        if not suitable and product.asin != self.settled:
            self.rejected.add(product.asin)
            return f"click[{PREV_PAGE.lower()}]"
        selected = state.selected
        for name, value in self.goal.options.items():
            if value in offered and selected.get(product.option_of_value.get(value, name)) != value:
                return f"click[{value}]"
        return f"click[{BUY_NOW.lower()}]"

    def _fallback(self, view: PageView) -> str:
        """Nothing suitable on any page: open the unrejected item sharing the most wanted words."""
        best = max(
            (p for p in view.results if p.asin not in self.rejected),
            key=lambda p: len(self.goal.wanted_words & set(words(p.title))),
            default=None,
        )
        if best is None:
            return f"click[{(PREV_PAGE if PREV_PAGE.lower() in view.clickables else BACK_TO_SEARCH).lower()}]"
        self.settled = best.asin  # open it and buy it with whatever it offers
        return f"click[{best.asin.lower()}]"
