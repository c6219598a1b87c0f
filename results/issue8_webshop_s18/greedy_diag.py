"""Why a WebShop policy's greedy score moves: per policy, greedy and sampled episodes on 40 valid goals
(scores in points, 0-100), split into bought (the episode ends with `click[buy now]`) and not (the cap).

usage: greedy_diag.py OUT.json NAME=FOLDER ...   (a saved policy or a training run's folder; one thread)
"""

import json
import math
import sys
from collections import Counter
from pathlib import Path

import torch

from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.registry import list_tasks
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout
from rspo_kit.train.trainer import trained_actor

CAP, N = 15, 40


def verb(action: str) -> str:
    a = action.lower()
    if a.startswith("search["):
        return "search"
    if a.startswith("click[buy"):
        return "buy"
    if a.startswith(("click[< prev", "click[next >", "click[back to search")):
        return "navigate"
    return "click"


def summary(trajs) -> dict:
    bought = [t for t in trajs if t.steps and verb(t.steps[-1].action) == "buy"]
    verbs = Counter(verb(s.action) for t in trajs for s in t.steps)
    total = sum(verbs.values())
    return {
        "episodes": len(trajs),
        "mean_score": sum(t.score for t in trajs) / len(trajs),
        "success": sum(t.won for t in trajs) / len(trajs),
        "bought_share": len(bought) / len(trajs),
        "score_when_bought": sum(t.score for t in bought) / max(1, len(bought)),
        "mean_steps": sum(t.env_steps for t in trajs) / len(trajs),
        "at_cap_share": sum(t.env_steps >= CAP for t in trajs) / len(trajs),
        "action_shares": {k: v / total for k, v in sorted(verbs.items())},
        # how sure the policy is of its navigation clicks: the chosen candidate's probability
        "navigation_prob": _mean(
            [math.exp(s.logprob) for t in trajs for s in t.steps if verb(s.action) == "navigate"]
        ),
        "other_prob": _mean(
            [math.exp(s.logprob) for t in trajs for s in t.steps if verb(s.action) != "navigate"]
        ),
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def main(out: str, *named: str) -> None:
    torch.set_num_threads(1)
    tasks = list_tasks("webshop", split="valid", n=N)
    report = {}
    for item in named:
        name, folder = item.split("=", 1)
        policy = trained_actor(folder) if (Path(folder) / "latest").exists() else Policy.load(folder)
        report[name] = {}
        for mode, greedy in (("greedy", True), ("sampled", False)):
            with BatchRunner("webshop", n_workers=0, env_kwargs={"max_steps": CAP}) as runner:
                cfg = RolloutConfig(group_size=1, greedy=greedy)
                trajs = rollout(policy, runner, tasks, cfg, seed=0, iteration=0, progress_bar=False)
            report[name][mode] = summary(trajs)
            print(
                name, mode, json.dumps({k: v for k, v in report[name][mode].items() if k != "action_shares"})
            )
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
