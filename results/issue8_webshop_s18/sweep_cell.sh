#!/bin/bash
# issue 8, session 18: GRPO on WebShop, partial credit as the outcome (score / 100), 3 seeds of plain / RSPO /
# control at the session-17 lr (1e-4, chosen on valid) and a 7,000-env-step budget (plain GRPO's best valid
# evaluation in session 17 was at 6.7k steps; it fell after). From the session-18 warm start, built by a number
# of updates (1,284: what the session-13 warm start's 10 minutes gave) so that any machine builds the same one:
#   .venv/bin/python -m rspo_kit.policy.warmstart --env webshop --preset tiny --demo-tasks 1500 --updates 1284 \
#     --threads 2 --pass-n 20 --out runs/s18/W_webshop_u1284
# Valid (40 tasks) every 5 iterations; tested once on 120 tasks of eval and eval_unseen, greedy and sampled.
# usage: sweep_cell.sh SWAP SEED  (SWAP: false, true or '"control"'; one cell per call, one thread)
WT=${SWEEP_WORKTREE:-/work/sweep_wt7}  # a frozen checkout at or after 807726d
cd "$WT"
export PYTHONPATH=$WT RSPO_KIT_CACHE=/work/main/.cache OMP_NUM_THREADS=1
exec /work/main/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
  --grid "{\"LR\": [0.0001], \"SEED\": [$2], \"ALGO\": [\"grpo\"], \"SWAP\": [$1]}" \
  --out /work/main/runs/sweeps/s18_webshop_7k --workers 1 -p THREADS 1 \
  -p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 7000 \
  -p OUTCOME_MODE score -p REPLAY_FILTER outcome_above_mean \
  -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 \
  -p FINAL_EVAL_SAMPLED true \
  -p ENV webshop -p MAX_STEPS 15 -p WARMSTART false -p POLICY /work/main/runs/s18/W_webshop_u1284/policy
