#!/bin/bash
# issue 8, session 30: notebook 06 executed on the committed 3-seed WebShop result, its two archives read as one
# sweep (SWEEPS; they are only read): every group's mean, the paired differences seed by seed and task by task,
# each group − the warm start, the learning curves and the runs' statistics. Runs on a fresh checkout (seconds):
#   bash results/issue8_webshop_s29/notebook06.sh   (after `make setup kernel`)
# -> results/issue8_webshop_s29/06_experiments_3seeds.ipynb; its tables and figures in runs/s30/webshop_pooled/
set -e
cd "$(dirname "$0")/../.."  # the repository root
S28=results/issue8_webshop_s28
HF_HUB_DISABLE_PROGRESS_BARS=1 .venv/bin/python -m papermill notebooks/06_experiments.ipynb \
  results/issue8_webshop_s29/06_experiments_3seeds.ipynb --kernel rspo-kit --no-progress-bar -y "
OUT: runs/s30/webshop_pooled
SWEEPS: [$S28/sweep_webshop, results/issue8_webshop_s29/sweep_webshop_seed2]
RUN_CELLS: false
METRIC: final_eval_score
CURVE: curve_score
EXTRA_METRICS: [final_eval_unseen_score, final_sampled_eval_score, final_sampled_eval_unseen_score,
                final_eval_success, start_success]
REFERENCE: $S28/webshop_warmstart_run
INTERACTIVE: false
"
