"""WebShop's pages in text mode: a browser state, how actions move it, and what each page shows.

``ShopState`` is the whole browser state (which page, query, results page, item, sub-page, selected
options); it is history-free, so its hash is the GiGPO anchor. ``render`` gives the visible texts
(joined with ``' [SEP] '`` into the observation) and the clickables; ``transition`` applies one parsed
action and returns ``None`` for anything the page does not offer (the env turns that into a no-op).
Button strings and page layouts follow the original templates.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Literal

from rspo_kit.envs.webshop.catalogue import Catalogue, Product

BACK_TO_SEARCH, PREV_PAGE, NEXT_PAGE, BUY_NOW = "Back to Search", "< Prev", "Next >", "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews")
PER_PAGE = 10
SEP = " [SEP] "
PageKind = Literal["search", "results", "item", "sub", "done"]
_ACTION = re.compile(r"^(search|click)\[(.*)\]$", re.S)


@dataclass(frozen=True)
class ShopState:
    kind: PageKind = "search"
    query: str = ""
    page: int = 1
    asin: str = ""
    sub: str = ""  # "description" | "features" | "reviews" on a sub-page
    options: tuple[tuple[str, str], ...] = ()  # selected (name, value), sorted by name

    @property
    def selected(self) -> dict[str, str]:
        return dict(self.options)

    def anchor(self) -> str:
        """Short history-free key: page kind + query + page + item + sub-page + selected options."""
        key = f"{self.kind}|{self.query}|{self.page}|{self.asin}|{self.sub}|{self.options}"
        # surrogatepass: a query is any string the model wrote, lone surrogates included; their code
        # units are hashed as they are, so two such queries keep two anchors
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
        return f"{self.kind}:{digest}"


@dataclass(frozen=True)
class PageView:
    """What the page shows: texts in order, clickables (lower-case) and whether it has a search bar."""

    texts: tuple[str, ...]
    clickables: tuple[str, ...]
    has_search_bar: bool
    results: tuple[Product, ...] = ()  # products listed on a results page
    product: Product | None = None  # the item of an item page or sub-page

    @property
    def text(self) -> str:
        return SEP.join(self.texts)

    def admissible(self) -> list[str]:
        return (["search[...]"] if self.has_search_bar else []) + [f"click[{c}]" for c in self.clickables]


def parse_action(command: str) -> tuple[str, str] | None:
    """``"search[red shoes]"`` -> ``("search", "red shoes")``; None if it is neither form.

    >>> parse_action("click[< prev]")
    ('click', '< prev')
    """
    m = _ACTION.match(command)
    if m is None:
        return None
    return m.group(1), " ".join(m.group(2).lower().split())


def page_items(results: tuple[str, ...], page: int) -> tuple[str, ...]:
    return results[(page - 1) * PER_PAGE : page * PER_PAGE]


def render(
    state: ShopState, instruction: str, catalogue: Catalogue, results: tuple[str, ...], done_text: str = ""
) -> PageView:
    """The page of ``state``; ``results`` are the asins the query found (ignored off the results page)."""
    header = ("WebShop", "Instruction:", instruction)
    if state.kind == "search":
        return PageView((*header, "Search"), (), True)
    if state.kind == "done":
        return PageView(("Thank you for shopping with us!", *done_text.split(SEP)), (), False)
    if state.kind == "results":
        shown = tuple(catalogue[a] for a in page_items(results, state.page))
        texts = [*header, BACK_TO_SEARCH, f"Page {state.page} (Total results: {len(results)})"]
        clicks = [BACK_TO_SEARCH.lower()]
        if state.page > 1:
            texts.append(PREV_PAGE)
            clicks.append(PREV_PAGE.lower())
        if state.page * PER_PAGE < len(results):
            texts.append(NEXT_PAGE)
            clicks.append(NEXT_PAGE.lower())
        for p in shown:
            texts += [p.asin, p.title, f"${p.price:.2f}"]
            clicks.append(p.asin.lower())
        return PageView(tuple(texts), tuple(clicks), False, results=shown)
    product = catalogue[state.asin]
    if state.kind == "sub":
        body = {
            "description": (product.description,),
            "features": product.bullets,
            "reviews": product.reviews,
        }[state.sub]
        texts = (*header, BACK_TO_SEARCH, PREV_PAGE, *body)
        return PageView(texts, (BACK_TO_SEARCH.lower(), PREV_PAGE.lower()), False, product=product)
    texts, clicks = [*header, BACK_TO_SEARCH, PREV_PAGE], [BACK_TO_SEARCH.lower(), PREV_PAGE.lower()]
    for name, values in product.options.items():
        texts += [name, *values]
        clicks += list(values)
    texts += [product.title, f"Price: ${product.price:.2f}", f"Rating: {product.rating}", *SUB_PAGES, BUY_NOW]
    clicks += [s.lower() for s in SUB_PAGES] + [BUY_NOW.lower()]
    return PageView(tuple(texts), tuple(dict.fromkeys(clicks)), False, product=product)


def transition(state: ShopState, view: PageView, action: tuple[str, str]) -> ShopState | None:
    """The state after ``action`` on the page ``view`` of ``state``; None if the page does not offer it.

    ``Buy Now`` returns a ``done`` state; the env scores it.
    """
    verb, arg = action
    if verb == "search":
        return ShopState("results", query=arg, page=1) if view.has_search_bar and arg else None
    if arg not in view.clickables:
        return None
    if arg == BACK_TO_SEARCH.lower():
        return ShopState("search")  # query, page and selected options are forgotten
    if state.kind == "results":
        if arg == NEXT_PAGE.lower():
            return replace(state, page=state.page + 1)
        if arg == PREV_PAGE.lower():
            return replace(state, page=state.page - 1)
        return replace(state, kind="item", asin=arg.upper())
    if state.kind == "sub":  # only "< prev" is left: back to the item page
        return replace(state, kind="item", sub="")
    if arg == PREV_PAGE.lower():
        return replace(state, kind="results", asin="")
    if arg == BUY_NOW.lower():
        return replace(state, kind="done")
    if arg in ("description", "features", "reviews"):
        return replace(state, kind="sub", sub=arg)
    # An option value: remembered per option name, as the original session does (kept across items).
    name = view.product.option_of_value[arg]
    options = dict(state.options)
    options[name] = arg
    return replace(state, options=tuple(sorted(options.items())))
