#!/bin/bash
# issue 8, session 31: notebook 06 executed on the ALFWorld process-only / mix / plain result on warm start D, every
# archive of it read as one sweep (SWEEPS; they are only read): every group's mean, process only − plain and
# mix − plain seed by seed and task by task, each group − warm start D, the learning curves, the runs' statistics.
# Runs on a fresh checkout (seconds):
#   bash results/issue8_alfworld_s30/notebook06.sh   (after `make setup kernel`)
# -> results/issue8_alfworld_s29/06_experiments.ipynb; its tables and figures in runs/s31/alfworld_D_pooled/
set -e
cd "$(dirname "$0")/../.."  # the repository root
SWEEPS=$(ls -d results/issue8_alfworld_s29/sweep_D results/issue8_alfworld_s30/sweep_* 2>/dev/null | paste -sd, -)
HF_HUB_DISABLE_PROGRESS_BARS=1 .venv/bin/python -m papermill notebooks/06_experiments.ipynb \
  results/issue8_alfworld_s29/06_experiments.ipynb --kernel rspo-kit --no-progress-bar -y "
OUT: runs/s31/alfworld_D_pooled
SWEEPS: [$SWEEPS]
RUN_CELLS: false
METRIC: final_eval_success
CURVE: curve_success
EXTRA_METRICS: [final_eval_unseen_success, final_sampled_eval_success, final_sampled_eval_unseen_success,
                start_success]
REFERENCE: results/issue8_webshop_s28/alfworld_warmstart_D
INTERACTIVE: false
"
