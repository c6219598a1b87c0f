#!/bin/bash
# issue 8, session 29 -> results/issue8_alfworld_s29/ (run after lanes.sh's cells; rerun as more finish): ALFWorld's
# process-only and mix baselines beside their plain cells, GRPO and PPO, on warm start D (16f7a37f1d66)
#  - report.md: every finished cell by seed, each variant − warm start D task by task
#    (results/issue8_webshop_s28/alfworld_warmstart_D), process − plain and mix − plain by seed and task by task,
#    the swap statistics, and how far the unfinished cells got
#  - results.csv, run_statistics.csv, curves.html (valid success against env steps)
#  - sweep_D/: the archive `report` reads like the sweep (finished cells only)
set -e
cd "$(dirname "$0")/../.."  # the repository root
R=results/issue8_alfworld_s29
OUT=runs/sweeps/s29_alfworld_D
D=results/issue8_webshop_s28/alfworld_warmstart_D
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
M="$M start_success iterations"
.venv/bin/python -m rspo_kit.experiments.archive $OUT $R/sweep_D
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M --reference $D \
  --curves $R/curves.html --paired SWAP=process,false --paired SWAP=mix,false > $R/report.md
.venv/bin/python - <<'PY'
from rspo_kit.experiments import aggregate
from rspo_kit.experiments.report import sweep_statistics

R, OUT = "results/issue8_alfworld_s29", "runs/sweeps/s29_alfworld_D"
aggregate(OUT).to_csv(f"{R}/results.csv", index=False)
sweep_statistics(OUT).to_csv(f"{R}/run_statistics.csv", index=False)
PY
rm -f $R/plotly.min.js  # the page falls back to the CDN's copy of the same version
cat $R/report.md
