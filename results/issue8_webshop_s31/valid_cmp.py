"""Each NAME's episodes against the first NAME's, goal by goal (valid240.sh; `--dir train400` for those).

.venv/bin/python results/issue8_webshop_s31/valid_cmp.py W ppo_s0 T05_s0
.venv/bin/python results/issue8_webshop_s31/valid_cmp.py --dir train400 W_sampled ppo28k_s0_sampled
"""

import argparse
from pathlib import Path

import pandas as pd

from rspo_kit.experiments.sweep import mean_ci

parser = argparse.ArgumentParser()
parser.add_argument("--dir", default="valid240", help="the episodes' folder beside this script")
parser.add_argument("names", nargs="+")
args = parser.parse_args()
V = Path(__file__).parent / args.dir
base = args.names[0]
ref = pd.read_csv(V / f"{base}.csv").set_index("task_id")
print(f"| policy | mean score | success % | steps | at the cap % | score − {base}, paired by goal |")
print("|---|---|---|---|---|---|")
for name in args.names:
    d = pd.read_csv(V / f"{name}.csv").set_index("task_id")
    mean, low, high = mean_ci((d.score - ref.score.reindex(d.index)).tolist())
    print(
        f"| {name} | {d.score.mean():.1f} | {100 * d.won.mean():.1f} | {d.steps.mean():.2f} | "
        f"{100 * (d.steps >= 15).mean():.1f} | {mean:+.1f} [{low:+.1f}, {high:+.1f}] |"
    )
