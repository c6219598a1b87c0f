#!/bin/bash
# issue 8, session 29 -> results/issue8_webshop_s29/: seed 2 of WebShop GiGPO and PPO, every variant, on session
# 28's warm start (digest 68bf9b54aa6e, runs/s28/W_webshop_u1284_t1, which this machine still held), run by
#   SWEEP_WORKTREE=<checkout of 0f94b38> SWEEP_OUT=runs/sweeps/s29_webshop_seed2 \
#     bash results/issue8_webshop_s28/lanes.sh lane a 2   # and lane b 2, side by side
# and pooled with session 28's seeds 0-1 (results/issue8_webshop_s28/sweep_webshop) into 3 seeds:
#  - report.md: every cell by seed, each variant − the warm start task by task, the six paired differences
#  - results.csv (the 30 cells), run_statistics.csv, metrics.csv (seed 2's training logs), curves.html (valid
#    score against env steps, 3 seeds)
#  - sweep_webshop_seed2/: seed 2's archive; `report` reads it like the sweep
set -e
cd "$(dirname "$0")/../.."  # the repository root
R=results/issue8_webshop_s29
S28=results/issue8_webshop_s28
OUT=runs/sweeps/s29_webshop_seed2
M="final_eval_score final_eval_unseen_score final_sampled_eval_score final_sampled_eval_unseen_score"
M="$M final_eval_success final_eval_unseen_success start_success iterations"
.venv/bin/python -m rspo_kit.experiments.archive $OUT $R/sweep_webshop_seed2
.venv/bin/python -m rspo_kit.experiments.report $S28/sweep_webshop $R/sweep_webshop_seed2 --statistics --metrics $M \
  --reference $S28/webshop_warmstart_run --curves $R/curves.html --curve curve_score \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false \
  --paired SWAP=process,false --paired SWAP=mix,false --paired SWAP=true,process > $R/report.md
.venv/bin/python - <<'PY'
import glob, os
import pandas as pd
from rspo_kit.experiments.report import pooled_sweep, sweep_statistics

R = "results/issue8_webshop_s29"
dirs = ["results/issue8_webshop_s28/sweep_webshop", f"{R}/sweep_webshop_seed2"]
manifest, rows, folders = pooled_sweep(dirs)
table = pd.DataFrame([{k: v for k, v in r.items() if not isinstance(v, (list, dict))} for r in rows])
table.to_csv(f"{R}/results.csv", index=False)
sweep_statistics(None, (manifest, rows), folders).to_csv(f"{R}/run_statistics.csv", index=False)
frames = [pd.read_json(f, lines=True).assign(cell=os.path.basename(os.path.dirname(f)))
          for f in sorted(glob.glob("runs/sweeps/s29_webshop_seed2/*/metrics.jsonl"))]
pd.concat(frames).to_csv(f"{R}/metrics.csv", index=False)
PY
rm -f $R/plotly.min.js  # the page falls back to the CDN's copy of the same version
cat $R/report.md
