#!/bin/bash
# issue 8, session 18, a probe: as sweep_cell.sh, but the outcome is success alone (WebShop's exact match),
# the regime RSPO's rescue is for (~half the actor's groups of 8 have no success at ~8% sampled success).
# The lr (1e-4) and budget (7k) were chosen for the score outcome, not for this one: a probe, not tuned.
# usage: sweep_cell_success.sh SWAP SEED  (SWAP: false, true or '"control"'; one cell per call, one thread)
WT=${SWEEP_WORKTREE:-/work/sweep_wt7}  # a frozen checkout at or after 807726d
cd "$WT"
export PYTHONPATH=$WT RSPO_KIT_CACHE=/work/main/.cache OMP_NUM_THREADS=1
exec /work/main/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
  --grid "{\"LR\": [0.0001], \"SEED\": [$2], \"ALGO\": [\"grpo\"], \"SWAP\": [$1]}" \
  --out /work/main/runs/sweeps/s18_webshop_7k_success --workers 1 -p THREADS 1 \
  -p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 7000 \
  -p OUTCOME_MODE success \
  -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 \
  -p FINAL_EVAL_SAMPLED true \
  -p ENV webshop -p MAX_STEPS 15 -p WARMSTART false -p POLICY /work/main/runs/s18/W_webshop_u1284/policy
