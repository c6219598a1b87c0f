#!/bin/bash
# issue 8, session 17: GRPO on WebShop, partial credit as the outcome (score / 100), 20k env steps from the
# session-13 warm start (runs/s13/L_webshop_chosen_2t: greedy success 0%, score ~40 on valid).
# Replay admits explorer episodes that beat the actor group's mean score (outcome_above_mean).
# Tuned on valid (40 tasks, every 10 iterations); tested once on 120 tasks of eval and eval_unseen.
# usage: s17_webshop_20k.sh SWAP LR SEED  (one cell per invocation, one thread; the manifest keeps all)
cd /work/sweep_wt6
export PYTHONPATH=/work/sweep_wt6 RSPO_KIT_CACHE=/work/main/.cache OMP_NUM_THREADS=1
exec /work/main/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
  --grid "{\"LR\": [$2], \"SEED\": [$3], \"ALGO\": [\"grpo\"], \"SWAP\": [$1]}" \
  --out /work/main/runs/sweeps/s17_webshop_20k --workers 1 -p THREADS 1 \
  -p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 20000 \
  -p OUTCOME_MODE score -p REPLAY_FILTER outcome_above_mean \
  -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 10 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 \
  -p FINAL_EVAL_SAMPLED true \
  -p ENV webshop -p MAX_STEPS 15 -p WARMSTART false -p POLICY /work/main/runs/s13/L_webshop_chosen_2t/policy
