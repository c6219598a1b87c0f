"""WebShop: the original text mode re-implemented over a generated catalogue, registered as ``"webshop"``."""

from rspo_kit.envs.registry import register_env
from rspo_kit.envs.webshop.catalogue import Catalogue, Product, load_catalogue
from rspo_kit.envs.webshop.env import WebShopEnv
from rspo_kit.envs.webshop.expert import Expert, parse_instruction
from rspo_kit.envs.webshop.goals import Goal, make_goal
from rspo_kit.envs.webshop.reward import RewardParts, score_purchase
from rspo_kit.envs.webshop.search import SearchEngine
from rspo_kit.envs.webshop.splits import webshop_tasks

register_env("webshop", make=WebShopEnv, list_tasks=webshop_tasks, overwrite=True)

__all__ = [
    "Catalogue",
    "Expert",
    "Goal",
    "Product",
    "RewardParts",
    "SearchEngine",
    "WebShopEnv",
    "load_catalogue",
    "make_goal",
    "parse_instruction",
    "score_purchase",
    "webshop_tasks",
]
