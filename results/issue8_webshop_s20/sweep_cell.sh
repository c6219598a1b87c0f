#!/bin/bash
# issue 8, session 20: PPO seeds 1-2, and two ablations of GRPO (replay off in the control; RSPO without its
# off-policy weights), on WebShop under session 18's GRPO protocol (results/issue8_webshop_s18, s19):
# partial credit as the outcome (score / 100), replay of above-mean episodes, lr 1e-4 (tuned on valid for GRPO
# in session 17, not re-tuned), a 7,000-env-step budget, from the session-18 warm start (1,284 SFT updates;
# rebuilt with the command in ../issue8_webshop_s18/sweep_cell.sh).
# Valid (40 tasks) every 5 iterations; tested once on 120 tasks of eval and eval_unseen, greedy and sampled.
# usage: sweep_cell.sh ALGO SWAP SEED [EXTRA_GRID_JSON]
#   ALGO: grpo, gigpo or ppo; SWAP: false, true, '"control"', '"process"' or '"mix"'; one cell per call, one
#   thread. EXTRA_GRID_JSON adds grid keys, e.g. '"REPLAY_RATIO": [0.0]' (needs a checkout at or after
#   session 20's notebook-04 parameters: set SWEEP_WORKTREE).
WT=${SWEEP_WORKTREE:-/work/sweep_wt8}  # a frozen checkout at or after abc6605
EXTRA=${4:+, $4}
cd "$WT"
export PYTHONPATH=$WT RSPO_KIT_CACHE=/work/main/.cache OMP_NUM_THREADS=1
exec /work/main/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
  --grid "{\"LR\": [0.0001], \"SEED\": [$3], \"ALGO\": [\"$1\"], \"SWAP\": [$2]$EXTRA}" \
  --out /work/main/runs/sweeps/s20_webshop_7k --workers 1 -p THREADS 1 \
  -p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 7000 \
  -p OUTCOME_MODE score -p REPLAY_FILTER outcome_above_mean \
  -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 \
  -p FINAL_EVAL_SAMPLED true \
  -p ENV webshop -p MAX_STEPS 15 -p WARMSTART false -p POLICY /work/main/runs/s18/W_webshop_u1284/policy
