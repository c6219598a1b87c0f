#!/bin/bash
# issue 8, sessions 22-23: ALFWorld GiGPO plain, RSPO and control, seeds 0-2 (those finished), under `make sweep`'s
# protocol (warm start by 1,536 SFT updates, lr 3e-5, 40k env steps, valid curves, 120 tasks of eval and eval_unseen
# greedy and sampled) -> results/
# The cells: make sweep SWEEP_GRID='{"ALGO": ["gigpo"], "SWAP": [false, true, "control"], "SEED": [0, 1, 2]}' \
#                       SWEEP_OUT=runs/sweeps/s22_alfworld_gigpo
# (session 22 ran seed 0 (results/issue8_alfworld_s22_gigpo/chain.sh); session 23 ran seeds 1-2 into the same folder
#  in two one-thread lanes, results/issue8_alfworld_s23_gigpo/lanes.sh: the same parameters with -p THREADS 1.
#  The warm start rebuilds identically, so the seeds pair; its own evaluation is ../issue8_alfworld_s22_gigpo/warmstart_eval120.json)
set -e
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s22_alfworld_gigpo
R=results/issue8_alfworld_s23_gigpo
mkdir -p $R
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
M="$M start_success best_success env_steps iterations"
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false > $R/report.md
.venv/bin/python - <<'PY'
from rspo_kit.experiments import aggregate
from rspo_kit.experiments.report import sweep_statistics
OUT, R = "runs/sweeps/s22_alfworld_gigpo", "results/issue8_alfworld_s23_gigpo"
aggregate(OUT).to_csv(f"{R}/results.csv", index=False)  # also writes the sweep's curves.html
sweep_statistics(OUT).to_csv(f"{R}/run_statistics.csv", index=False)
PY
cp $OUT/curves.html $R/
# notebook 06 in summary mode (no cell runs): the table, the paired differences and the curves, executed with outputs
.venv/bin/papermill -k rspo-kit notebooks/06_experiments.ipynb $R/06_experiments.ipynb --cwd . \
  -p OUT $OUT -p RUN_CELLS False -p INTERACTIVE False -p METRIC final_eval_success \
  -y '{"GRID": {"ALGO": ["gigpo"], "SWAP": [false, true, "control"], "SEED": [0, 1, 2]},
       "EXTRA_METRICS": ["final_eval_unseen_success", "final_sampled_eval_success", "final_sampled_eval_unseen_success",
                         "start_success", "best_success", "env_steps", "iterations"]}' > /dev/null 2>&1
cp $OUT/summary_bars.html $R/ 2>/dev/null || true
# the per-iteration metrics of every cell (swap statistics, valid curve), for the tables in results/README.md
.venv/bin/python - <<'PY'
import glob, os
import pandas as pd
frames = []
for f in sorted(glob.glob("runs/sweeps/s22_alfworld_gigpo/ALGO=*/metrics.jsonl")):
    frames.append(pd.read_json(f, lines=True).assign(cell=os.path.basename(os.path.dirname(f))))
if frames:
    pd.concat(frames).to_csv("results/issue8_alfworld_s23_gigpo/metrics.csv", index=False)
PY
# the misalignment debugger on the finished RSPO cell (reads its turn tables; no training)
for nb in $OUT/ALGO=gigpo__SWAP=true__SEED=*.ipynb; do
  cell=$(basename "$nb" .ipynb); seed=${cell##*SEED=}
  .venv/bin/python -m rspo_kit.experiments.results "$nb" > /dev/null 2>&1 || continue
  .venv/bin/papermill -k rspo-kit notebooks/05_misalignment_debugger.ipynb $R/05_misalignment_seed${seed}_rspo.ipynb \
    --cwd . -p DEBUG_RUN "$OUT/$cell" -p INTERACTIVE False -p THREADS 1 > /dev/null 2>&1
done
ls -la $R; cat $R/report.md
