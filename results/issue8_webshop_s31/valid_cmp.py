"""Each NAME's greedy episodes on the 240 valid goals against the first NAME's, goal by goal (valid240.sh).

.venv/bin/python results/issue8_webshop_s31/valid_cmp.py W ppo_s0 T05_s0
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

V = Path(__file__).parent / "valid240"
base, *names = sys.argv[1:]
ref = pd.read_csv(V / f"{base}.csv").set_index("task_id")
print(f"| policy | mean score | success % | steps | at the cap % | score − {base}, paired by goal |")
print("|---|---|---|---|---|---|")
for name in [base, *names]:
    d = pd.read_csv(V / f"{name}.csv").set_index("task_id")
    diff = (d.score - ref.score.reindex(d.index)).to_numpy()
    half = 1.96 * diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else 0.0
    print(
        f"| {name} | {d.score.mean():.1f} | {100 * d.won.mean():.1f} | {d.steps.mean():.2f} | "
        f"{100 * (d.steps >= 15).mean():.1f} | {diff.mean():+.1f} [{diff.mean() - half:+.1f}, {diff.mean() + half:+.1f}] |"
    )
