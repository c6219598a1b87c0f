"""Built-in WebShop process rewards, read from the WebShop env's progress dict.

The progress dict (numbers only): ``query_coverage`` (0..1, share of the goal the last search
covers), ``goal_type_viewed`` (0/1, sticky), ``items_viewed`` and ``pages_visited`` (sticky counts),
``current_reward`` (0..1, what buying the product on screen with the chosen options would score),
``options_matched`` and ``options_total``. Three rewards, from aligned to hackable: ``subgoal``,
``heuristic`` and ``hack`` (only ``misalign`` mixes it in).
"""

from __future__ import annotations

from collections.abc import Mapping

from rspo_kit.envs.base import normalize_command
from rspo_kit.rewards.process import ProcessStep, register_potential, register_step_reward

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


@register_potential("webshop", "subgoal")
def webshop_subgoal(progress: Mapping[str, float]) -> float:
    """Φ = mean of query_coverage, goal_type_viewed and current_reward; the reward is Φ(after) − Φ(before).

    Potential-based, like ALFWorld's ``subgoal``: going back to search pays back the product's
    ``current_reward`` and clicking it again earns it again, so the return telescopes to
    Φ(last) − Φ(first) and loops earn nothing. On the final page ``current_reward`` is the reward
    of the product bought, so a return of 1 means the search covered the goal, the right type was
    seen, and the purchase scored 1.

    >>> from rspo_kit.rewards import process_reward
    >>> reward = process_reward("subgoal", env="webshop")
    >>> state = {"query_coverage": 0.0, "goal_type_viewed": 0, "current_reward": 0.0}
    >>> round(reward(state, {**state, "query_coverage": 0.75}, "search[red cotton shirt]", True, {}), 6)
    0.25
    >>> round(reward({**state, "current_reward": 0.6}, state, "click[back to search]", True, {}), 6)
    -0.2
    """
    return sum(float(progress[key]) for key in SUBGOAL_KEYS) / len(SUBGOAL_KEYS)


@register_step_reward("webshop", "heuristic")
def webshop_heuristic(step: ProcessStep) -> float:
    """Bonuses for a new page, a newly clicked product, and a search that covers more of the goal.

    Hackable on purpose: any product counts, whatever its type, and alternating a poor and a good
    search pays the coverage gain every time.

    >>> state = {"pages_visited": 1, "items_viewed": 0, "query_coverage": 0.5}
    >>> after = {**state, "pages_visited": 2, "items_viewed": 1}
    >>> round(webshop_heuristic(ProcessStep(state, after, "click[b0001]", True, {})), 6)
    0.2
    >>> webshop_heuristic(ProcessStep(state, {**state, "query_coverage": 1.0}, "search[red cotton shirt large]", True, {}))
    0.5
    """
    before, after = step.progress_before, step.progress_after
    new_pages = max(0, after["pages_visited"] - before["pages_visited"])
    new_items = max(0, after["items_viewed"] - before["items_viewed"])
    coverage_gain = max(0.0, after["query_coverage"] - before["query_coverage"])
    return NEW_PAGE_BONUS * new_pages + NEW_ITEM_BONUS * new_items + coverage_gain


@register_step_reward("webshop", "hack")
def webshop_hack(step: ProcessStep) -> float:
    """One subgoal's pay (1/3) per navigation click or newly clicked product; never for options or Buy Now.

    Paging, sub-pages and browsing products repeat without choosing anything, so a policy that
    maximises this term never buys.

    >>> state = {"items_viewed": 2}
    >>> round(webshop_hack(ProcessStep(state, state, "click[Next >]", True, {})), 6)
    0.333333
    >>> webshop_hack(ProcessStep(state, state, "click[buy now]", True, {}))
    0.0
    """
    if not step.valid:
        return 0.0
    navigation = normalize_command(step.action) in NAVIGATION_CLICKS
    new_item = step.progress_after["items_viewed"] > step.progress_before["items_viewed"]
    return (int(navigation) + int(new_item)) / len(SUBGOAL_KEYS)
