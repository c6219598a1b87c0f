#!/bin/bash
# issue 8, sessions 15-16: the 3-seed GRPO plain / RSPO / control sweep from the session-11 warm start -> results/
set -e
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s15_alfworld_40k_s11
R=results/issue8_alfworld_s11_3seeds
mkdir -p $R
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M > $R/report.md
.venv/bin/papermill -k rspo-kit notebooks/06_experiments.ipynb $R/06_experiments.ipynb --cwd . \
  -p OUT $OUT -p RUN_CELLS False -p INTERACTIVE False -p METRIC final_eval_success \
  -y '{"GRID": {"SEED": [0, 1, 2], "ALGO": ["grpo"], "SWAP": [false, true, "control"]},
       "EXTRA_METRICS": ["final_eval_unseen_success", "final_sampled_eval_success", "final_sampled_eval_unseen_success",
                         "start_success", "best_success", "env_steps", "iterations"]}' > $R/papermill.log 2>&1
cp $OUT/results.csv $OUT/curves.html $OUT/summary_bars.html $R/
.venv/bin/python - <<'PY'
import pandas as pd
from rspo_kit.experiments import aggregate, summarize
from rspo_kit.experiments.report import statistics_columns, sweep_statistics
OUT, R = "runs/sweeps/s15_alfworld_40k_s11", "results/issue8_alfworld_s11_3seeds"
stats = sweep_statistics(OUT)
stats.to_csv(f"{R}/run_statistics.csv", index=False)
metrics = ["final_eval_success", "final_eval_unseen_success", "final_sampled_eval_success",
           "final_sampled_eval_unseen_success", "start_success", "best_success", "env_steps", "iterations"]
table = aggregate(OUT)
summary = summarize(table, ["SWAP"], [m for m in metrics if m in table])
summary = pd.concat([summary, summarize(stats, ["SWAP"], statistics_columns(stats))], ignore_index=True)
summary.to_csv(f"{R}/summary.csv", index=False)
PY
rm -f $R/papermill.log
# the misalignment debugger on every finished RSPO cell (reads its turn tables; no training)
for nb in $OUT/SEED=*__ALGO=grpo__SWAP=true.ipynb; do
  cell=$(basename "$nb" .ipynb); seed=${cell#SEED=}; seed=${seed%%__*}
  .venv/bin/python -m rspo_kit.experiments.results "$nb" > /dev/null 2>&1 || continue
  .venv/bin/papermill -k rspo-kit notebooks/05_misalignment_debugger.ipynb $R/05_misalignment_seed${seed}_rspo.ipynb \
    --cwd . -p DEBUG_RUN "$OUT/$cell" -p INTERACTIVE False -p THREADS 1 > /dev/null 2>&1
done
ls -la $R; cat $R/report.md
