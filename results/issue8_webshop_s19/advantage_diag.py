"""What each variant's actor is pushed towards on WebShop: from a training run's per-turn tables (turns/*.parquet),
per role (the actor's own episodes, replayed ones, the explorer's), the share of navigation steps (prev / next /
back to search), how often the episode buys, and the mean advantage the update gives each kind of step.

usage: advantage_diag.py OUT.json RUN_FOLDER ...   (no model needed; PPO runs have no advantages in the table)
"""

import json
import sys
from pathlib import Path

import pandas as pd

from rspo_kit.records.tables import load_turns
from state_probe import verb  # the same verbs (this folder is on the path when run as a script)


def role_summary(turns: pd.DataFrame) -> dict:
    episodes = turns.groupby(["iteration", "traj_id"])
    bought = episodes["action"].agg(lambda a: verb(a.iloc[-1]) == "buy")
    out = {
        "episodes": int(len(bought)),
        "bought": float(bought.mean()),
        "mean_outcome": float(episodes["outcome"].first().mean()),
        "steps_per_episode": float(len(turns) / max(1, len(bought))),
    }
    verbs = turns["action"].map(verb)
    for v in ("search", "click", "navigate", "buy"):
        part = turns[verbs == v]
        out[f"share_{v}"] = float(len(part) / max(1, len(turns)))
        out[f"advantage_{v}"] = float(part["advantage"].mean()) if len(part) else float("nan")
        # summed advantage on this kind of step per episode: the direction and weight of the push on it
        out[f"push_{v}"] = float(part["advantage"].sum() / max(1, len(bought)))
    return out


def run_summary(folder: Path) -> dict:
    turns = load_turns(folder)
    last = turns["iteration"].max()
    halves = {"all": turns, "second_half": turns[turns["iteration"] > last / 2]}
    report = {
        span: {role: role_summary(part) for role, part in frame.groupby("role")} for span, frame in halves.items()
    }
    # the drift: navigation's share of the steps per role in each third of the run's iterations
    third = ((3 * (turns["iteration"] - 1)) // last).clip(upper=2)
    nav = turns["action"].map(verb) == "navigate"
    share = nav.groupby([turns["role"], third]).mean().unstack()
    report["navigation_share_by_third"] = {role: row.tolist() for role, row in share.iterrows()}
    return report


if __name__ == "__main__":
    out, folders = Path(sys.argv[1]), [Path(f) for f in sys.argv[2:]]
    report = {f.name: run_summary(f) for f in folders}
    out.write_text(json.dumps(report, indent=1))
    for name, spans in report.items():
        print(name, "navigation share by third:", {r: [round(v, 3) for v in x]
                                                    for r, x in spans["navigation_share_by_third"].items()})
        for role, s in spans["all"].items():
            print(f"{name:48s} {role:8s} n={s['episodes']:4d} bought {s['bought']:.2f} outcome {s['mean_outcome']:.3f} "
                  f"nav {s['share_navigate']:.3f} adv nav {s['advantage_navigate']:+.3f} buy {s['advantage_buy']:+.3f} "
                  f"push nav {s['push_navigate']:+.3f} buy {s['push_buy']:+.3f}")
