#!/bin/bash
# issue 8, session 28 -> results/issue8_webshop_s28/. Session 27's plan, cut off with its machine (its cells were
# never collected): WebShop under sessions 18-20's protocol (results/issue8_webshop_s19/sweep_cell.sh: score / 100
# as the outcome, replay of above-mean episodes, 7k env steps, lr 1e-4, 120 + 120 test goals greedy and sampled)
# from a warm start by session 18's recipe (1,284 SFT updates) built on ONE thread, and on it every variant of
# GiGPO (lane a) and PPO (lane b): plain, RSPO, process-only, mix, control, seed 0 first. Session 18's warm start
# (two threads) does not rebuild (session 27: its SFT losses part at updates 228 and 489), so these cells pair
# with each other, not with sessions 18-20's.
# Usage: lanes.sh webshop_warm [NAME] | webshop_warm_eval | web ALGO SWAP SEED | lane a|b [SEEDS]
cd "$(dirname "$0")/../.."  # the repository root
WT=${SWEEP_WORKTREE:-/work/sweep_wt28}  # a frozen checkout (git worktree add --detach): 8d18ffd for seeds 0-1, 0f94b38 for seed 2
W=runs/s28/W_webshop_u1284_t1  # session 18's recipe on one thread
OUT=${SWEEP_OUT:-runs/sweeps/s28_webshop_7k}  # SWEEP_OUT: another sweep folder (session 29: seed 2)
web() {  # algo swap seed: one WebShop cell, as results/issue8_webshop_s19/sweep_cell.sh
  echo "$(date) start webshop $1 SWAP=$2 SEED=$3"
  (cd "$WT" && PYTHONPATH=$WT RSPO_KIT_CACHE=/work/main/.cache OMP_NUM_THREADS=1 \
    /work/main/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
    --grid "{\"LR\": [0.0001], \"SEED\": [$3], \"ALGO\": [\"$1\"], \"SWAP\": [$2]}" \
    --out /work/main/$OUT --workers 1 -p THREADS 1 \
    -p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 7000 \
    -p OUTCOME_MODE score -p REPLAY_FILTER outcome_above_mean \
    -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 \
    -p FINAL_EVAL_SAMPLED true \
    -p ENV webshop -p MAX_STEPS 15 -p WARMSTART false -p POLICY /work/main/$W/policy)
  echo "$(date) end webshop $1 SWAP=$2 SEED=$3 rc=$?"
}
case "$1" in
  webshop_warm)  # session 18's command on one thread; a second NAME rebuilds it beside the first to compare
    .venv/bin/python -m rspo_kit.policy.warmstart --env webshop --preset tiny --demo-tasks 1500 --updates 1284 \
      --threads 1 --pass-n 20 --out runs/s28/${2:-W_webshop_u1284_t1} ;;
  webshop_warm_eval)  # the warm start on the cells' 120 + 120 test goals, for `report --reference`
    OMP_NUM_THREADS=1 .venv/bin/python -m rspo_kit.train --preset tiny --env webshop train.iterations=0 \
      train.eval_n=0 train.threads=1 policy.preset=$W/policy policy.warmstart=false env.max_steps=15 \
      train.run_dir=runs/s28/webshop_warmstart_run train.final_eval_split=eval,eval_unseen \
      train.final_eval_n=120 train.final_eval_sampled=true ;;
  web) web "$2" "$3" "$4" ;;
  lane)
    for s in ${3:-0 1 2}; do
      for v in false true '"process"' '"mix"' '"control"'; do
        case "$2" in a) web gigpo "$v" $s ;; b) web ppo "$v" $s ;; *) echo "lanes: a (GiGPO), b (PPO)"; exit 2 ;; esac
      done
    done ;;
  *) echo "usage: lanes.sh webshop_warm [NAME] | webshop_warm_eval | web ALGO SWAP SEED | lane a|b [SEEDS]"; exit 2 ;;
esac
