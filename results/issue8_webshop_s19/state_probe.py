"""Where trained WebShop actors put their probability on the same states: the warm start's own episodes on 40
valid goals (greedy and sampled), and each policy's choice distribution over the candidates of every state.
Per page kind (item page: `click[buy now]` is a candidate; results page: it is not, `click[next >]` is), the mean
probability of navigation (prev / next / back to search), of buying and of other clicks (options, products), and
the share of states whose argmax is each of them (and the argmax per state): what a greedy policy does on a page,
measured state by state without the drift of an episode.

usage: state_probe.py OUT.json WARM_POLICY NAME=FOLDER ...   (a saved policy or a training run's folder; one thread)
"""

import json
import sys
from pathlib import Path

import torch

from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.registry import list_tasks
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout
from rspo_kit.policy.scoring import candidate_logprobs
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


def states(policy: Policy) -> list[dict]:
    """Every choice the warm start made in 40 greedy and 40 sampled episodes: prompt, candidates, their verbs."""
    tasks = list_tasks("webshop", split="valid", n=N)
    out = []
    for greedy in (True, False):
        with BatchRunner("webshop", n_workers=0, env_kwargs={"max_steps": CAP}) as runner:
            trajs = rollout(policy, runner, tasks, RolloutConfig(group_size=1, greedy=greedy), seed=0)
        for t in trajs:
            for s in t.steps:
                verbs = [verb(policy.tokenizer.decode(c)) for c in s.candidates]
                page = "item" if "buy" in verbs else "results" if "navigate" in verbs else "other"
                out.append({"prompt": s.prompt_ids, "candidates": s.candidates, "verbs": verbs, "page": page})
    return out


def probe(policy: Policy, rows: list[dict]) -> dict:
    with torch.no_grad():
        lps = candidate_logprobs(policy.model, [r["prompt"] for r in rows], [r["candidates"] for r in rows],
                                 policy.tokenizer.pad_token_id)
    report = {}
    for page in ("item", "results"):
        picked = [(r, lp.log_softmax(-1).exp()) for r, lp in zip(rows, lps) if r["page"] == page]
        mass = {v: sum(float(p[[i for i, x in enumerate(r["verbs"]) if x == v]].sum()) for r, p in picked) / len(picked)
                for v in ("navigate", "buy", "click")}
        top = [r["verbs"][int(p.argmax())] for r, p in picked]
        report[page] = {
            "states": len(picked),
            **{f"p_{v}": m for v, m in mass.items()},
            **{f"argmax_{v}": top.count(v) / len(top) for v in ("navigate", "buy", "click")},
            "argmax": top,  # per state, in order: compare policies state by state
        }
    return report


def main(out: str, warm: str, *named: str) -> None:
    torch.set_num_threads(1)
    base = Policy.load(warm)
    rows = states(base)
    report = {"warm": probe(base, rows)}
    for item in named:
        name, folder = item.split("=", 1)
        policy = trained_actor(folder) if (Path(folder) / "latest").exists() else Policy.load(folder)
        report[name] = probe(policy, rows)
    for name, r in report.items():
        print(name, json.dumps({page: {k: v for k, v in x.items() if k != "argmax"} for page, x in r.items()}))
    Path(out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
