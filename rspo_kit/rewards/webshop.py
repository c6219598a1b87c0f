"""Built-in WebShop process rewards, read from the WebShop env's progress dict.

The progress dict (numbers only): ``query_coverage`` (0..1, share of the goal the last search
covers), ``goal_type_viewed`` (0/1, sticky), ``items_viewed`` and ``pages_visited`` (sticky counts),
``current_reward`` (0..1, what buying the product on screen with the chosen options would score),
``options_matched`` and ``options_total``. Three rewards, from aligned to hackable: ``subgoal``,
``heuristic`` and ``hack`` (only ``misalign`` mixes it in).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rspo_kit.envs.base import normalize_command
from rspo_kit.rewards.process import register_process_reward

# Subgoals of a purchase, each worth 1/3 of the episode: searched for the goal, opened a product of
# the goal's type, have on screen a product (with options) that would score well if bought now.
SUBGOAL_KEYS = ("query_coverage", "goal_type_viewed", "current_reward")

NEW_PAGE_BONUS = 0.1
NEW_ITEM_BONUS = 0.1

# Clicks that move around the site without choosing anything: the loops ``hack`` pays for.
NAVIGATION_CLICKS = frozenset(
    f"click[{button}]"
    for button in ("back to search", "< prev", "next >", "description", "features", "reviews")
)


def _potential(progress: Mapping[str, float]) -> float:
    return sum(float(progress[key]) for key in SUBGOAL_KEYS) / len(SUBGOAL_KEYS)


@register_process_reward("webshop", "subgoal")
def webshop_subgoal(
    progress_before: Mapping[str, float],
    progress_after: Mapping[str, float],
    action: str,
    valid: bool,
    info: Mapping[str, Any],
) -> float:
    """Φ(after) − Φ(before), Φ = mean of query_coverage, goal_type_viewed and current_reward.

    Potential-based, like ALFWorld's ``subgoal``: going back to search pays back the product's
    ``current_reward`` and clicking it again earns it again, so the return telescopes to
    Φ(last) − Φ(first) and loops earn nothing. On the final page ``current_reward`` is the reward
    of the product bought, so a return of 1 means the search covered the goal, the right type was
    seen, and the purchase scored 1.

    >>> state = {"query_coverage": 0.0, "goal_type_viewed": 0, "current_reward": 0.0}
    >>> round(webshop_subgoal(state, {**state, "query_coverage": 0.75}, "search[red cotton shirt]", True, {}), 6)
    0.25
    >>> round(webshop_subgoal({**state, "current_reward": 0.6}, state, "click[back to search]", True, {}), 6)
    -0.2
    """
    return _potential(progress_after) - _potential(progress_before)


@register_process_reward("webshop", "heuristic")
def webshop_heuristic(
    progress_before: Mapping[str, float],
    progress_after: Mapping[str, float],
    action: str,
    valid: bool,
    info: Mapping[str, Any],
) -> float:
    """Bonuses for a new page, a newly clicked product, and a search that covers more of the goal.

    Hackable on purpose: any product counts, whatever its type, and alternating a poor and a good
    search pays the coverage gain every time.

    >>> state = {"pages_visited": 1, "items_viewed": 0, "query_coverage": 0.5}
    >>> round(webshop_heuristic(state, {**state, "pages_visited": 2, "items_viewed": 1}, "click[b0001]", True, {}), 6)
    0.2
    >>> webshop_heuristic(state, {**state, "query_coverage": 1.0}, "search[red cotton shirt large]", True, {})
    0.5
    """
    new_pages = max(0, progress_after["pages_visited"] - progress_before["pages_visited"])
    new_items = max(0, progress_after["items_viewed"] - progress_before["items_viewed"])
    coverage_gain = max(0.0, progress_after["query_coverage"] - progress_before["query_coverage"])
    return NEW_PAGE_BONUS * new_pages + NEW_ITEM_BONUS * new_items + coverage_gain


@register_process_reward("webshop", "hack")
def webshop_hack(
    progress_before: Mapping[str, float],
    progress_after: Mapping[str, float],
    action: str,
    valid: bool,
    info: Mapping[str, Any],
) -> float:
    """One subgoal's pay (1/3) per navigation click or newly clicked product; never for options or Buy Now.

    Paging, sub-pages and browsing products repeat without choosing anything, so a policy that
    maximises this term never buys.

    >>> state = {"items_viewed": 2}
    >>> round(webshop_hack(state, state, "click[Next >]", True, {}), 6)
    0.333333
    >>> webshop_hack(state, state, "click[buy now]", True, {})
    0.0
    """
    if not valid:
        return 0.0
    navigation = normalize_command(action) in NAVIGATION_CLICKS
    new_item = progress_after["items_viewed"] > progress_before["items_viewed"]
    return (int(navigation) + int(new_item)) / len(SUBGOAL_KEYS)
