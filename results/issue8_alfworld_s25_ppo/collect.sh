#!/bin/bash
# issue 8, session 25: ALFWorld PPO plain, RSPO and control under `make sweep`'s protocol (the warm start by
# 1,536 SFT updates that sessions 22-24's GiGPO cells share, lr 3e-5, 40k env steps, valid curves, 120 tasks
# of eval and eval_unseen greedy and sampled), each against that warm start task by task
# -> results/issue8_alfworld_s25_ppo/. The cells: lanes.sh (a = RSPO, b = plain, c = control; SEED).
set -e
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s25_alfworld_ppo
R=results/issue8_alfworld_s25_ppo
WARM=runs/sweeps/s22_alfworld_gigpo/warmstart_run  # the same warm start (.cache/warmstart/alfworld_tiny_eaf079b86b94)
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
M="$M start_success best_success env_steps iterations"
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M --reference $WARM \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false > $R/report.md
# PPO against GiGPO (sessions 22-24, the same warm start, seeds and tasks), variant by variant
.venv/bin/python -m rspo_kit.experiments.report runs/sweeps/s22_alfworld_gigpo $OUT --metrics $M --paired ALGO=ppo,gigpo \
  > $R/report_ppo_vs_gigpo.md
.venv/bin/python - <<'PY'
import glob, os
import pandas as pd
from rspo_kit.experiments import aggregate
from rspo_kit.experiments.report import sweep_statistics
OUT, R = "runs/sweeps/s25_alfworld_ppo", "results/issue8_alfworld_s25_ppo"
aggregate(OUT).to_csv(f"{R}/results.csv", index=False)  # also writes the sweep's curves.html
sweep_statistics(OUT).to_csv(f"{R}/run_statistics.csv", index=False)
frames = [
    pd.read_json(f, lines=True).assign(cell=os.path.basename(os.path.dirname(f)))
    for f in sorted(glob.glob(f"{OUT}/ALGO=*/metrics.jsonl"))
]
pd.concat(frames).to_csv(f"{R}/metrics.csv", index=False)
PY
cp $OUT/curves.html $R/
SEEDS=$(.venv/bin/python -c "import json; print(sorted({c['SEED'] for c in json.load(open('$OUT/sweep.json'))['cells'].values()}))")
# notebook 06 in summary mode (no cell runs): the table, the paired differences, against the warm start
.venv/bin/papermill -k rspo-kit notebooks/06_experiments.ipynb $R/06_experiments.ipynb --cwd . \
  -p OUT $OUT -p RUN_CELLS False -p INTERACTIVE False -p METRIC final_eval_success -p REFERENCE $WARM \
  -y "{\"GRID\": {\"ALGO\": [\"ppo\"], \"SWAP\": [false, true, \"control\"], \"SEED\": $SEEDS},
       \"EXTRA_METRICS\": [\"final_eval_unseen_success\", \"final_sampled_eval_success\", \"final_sampled_eval_unseen_success\",
                         \"start_success\", \"best_success\", \"env_steps\", \"iterations\"]}" > /dev/null 2>&1
cp $OUT/summary_bars.html $R/ 2>/dev/null || true
# the misalignment debugger (notebook 05, reads the turn tables; seconds) on RSPO's seed 0
R0="$OUT/ALGO=ppo__SWAP=true__SEED=0"
if [ -f "$R0/final_episodes.parquet" ]; then
  .venv/bin/papermill -k rspo-kit notebooks/05_misalignment_debugger.ipynb $R/05_misalignment_seed0_rspo.ipynb \
    --cwd . -p DEBUG_RUN "$R0" -p INTERACTIVE False -p THREADS 1 > /dev/null 2>&1 || echo "notebook 05 failed"
fi
ls -la $R; cat $R/report.md
