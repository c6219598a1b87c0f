#!/bin/bash
# s27: a fresh machine again. Two jobs, two lanes of one thread each (the warm starts excepted):
#  1. ALFWorld: rebuild `make sweep`'s warm start (.cache/warmstart/alfworld_tiny_eaf079b86b94) with session 26's
#     fix (rspo_kit.train.setup.WARMSTART_THREADS = 1) and check it is sessions 22-25's warm start A
#     (valid 32.5; test greedy 27.5 / 28.3, sampled 36.7 / 24.2 on eval / eval_unseen).
#  2. WebShop under sessions 18-20's protocol (results/issue8_webshop_s19/sweep_cell.sh: score / 100 as the outcome,
#     7k env steps, lr 1e-4). Session 18's warm start (--updates 1284 --threads 2) does not rebuild: two rebuilds by
#     its command, one beside another job and one on an idle machine, left its SFT losses at updates 228 and 489
#     (1 ulp, then growing): SFT on two threads is not bit-reproducible here. So a new warm start by the same recipe
#     on ONE thread (reproducible, as ALFWorld's), and on it every variant of GiGPO (lane a) and PPO (lane b), seed
#     0 first: plain, RSPO, process-only, mix, control.
# Usage: lanes.sh alfworld_warm | webshop_warm | web ALGO SWAP SEED | lane NAME (a list of cells below)
cd "$(dirname "$0")/../.."  # the repository root
WT=${SWEEP_WORKTREE:-/work/sweep_wt27}  # a frozen checkout of 4367729 (git worktree add --detach)
W=runs/s27/W_webshop_u1284_t1  # session 18's recipe on one thread: see the header
web() {  # algo swap seed: one WebShop cell, as results/issue8_webshop_s19/sweep_cell.sh
  echo "$(date) start webshop $1 SWAP=$2 SEED=$3"
  (cd "$WT" && PYTHONPATH=$WT RSPO_KIT_CACHE=/work/main/.cache OMP_NUM_THREADS=1 \
    /work/main/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
    --grid "{\"LR\": [0.0001], \"SEED\": [$3], \"ALGO\": [\"$1\"], \"SWAP\": [$2]}" \
    --out /work/main/runs/sweeps/s27_webshop_7k --workers 1 -p THREADS 1 \
    -p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 7000 \
    -p OUTCOME_MODE score -p REPLAY_FILTER outcome_above_mean \
    -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 \
    -p FINAL_EVAL_SAMPLED true \
    -p ENV webshop -p MAX_STEPS 15 -p WARMSTART false -p POLICY /work/main/$W/policy)
  echo "$(date) end webshop $1 SWAP=$2 SEED=$3 rc=$?"
}
case "$1" in
  alfworld_warm)  # make sweep's warm-start step, verbatim
    .venv/bin/python -m rspo_kit.train --preset tiny --env alfworld train.iterations=0 train.eval_n=0 \
      policy.sft_updates=1536 env.max_steps=30 train.run_dir=runs/sweeps/s27_alfworld/warmstart_run \
      train.final_eval_split=eval,eval_unseen train.final_eval_n=120 train.final_eval_sampled=true ;;
  webshop_warm)  # session 18's command
    .venv/bin/python -m rspo_kit.policy.warmstart --env webshop --preset tiny --demo-tasks 1500 --updates 1284 \
      --threads 1 --pass-n 20 --out $W ;;
  web) web "$2" "$3" "$4" ;;
  lane)
    case "$2" in
      a) for s in 0 1 2; do for v in false true '"process"' '"mix"' '"control"'; do web gigpo "$v" $s; done; done ;;
      b) for s in 0 1 2; do for v in false true '"process"' '"mix"' '"control"'; do web ppo "$v" $s; done; done ;;
      *) echo "lanes: a (GiGPO), b (PPO)"; exit 2 ;;
    esac ;;
  *) echo "usage: lanes.sh alfworld_warm | webshop_warm | web ALGO SWAP SEED | lane a|b"; exit 2 ;;
esac
