#!/bin/bash
# issue 8, session 29: ALFWorld's process-only and mix baselines, which no base algorithm has at 3 seeds (GRPO and
# PPO have none), beside their own plain cells, on warm start D — `make sweep`'s ALFWorld warm start as this
# machine kind builds it (Intel Xeon, AVX-512 / AMX; digest 16f7a37f1d66, session 28; its test episodes are
# results/issue8_webshop_s28/alfworld_warmstart_D), read from the cache (.cache/warmstart/alfworld_tiny_eaf079b86b94).
# `make sweep`'s protocol (lr 3e-5, 40k env steps, cap 30, one thread a cell), two lanes, GRPO first. Cells are
# resumable: a lane rerun after a kill skips finished cells and continues the others from their last checkpoint.
# Usage: lanes.sh a|b | cell ALGO SWAP SEED   (SWAP as in a grid: false, '"process"')
cd "$(dirname "$0")/../.."  # the repository root
WT=${SWEEP_WORKTREE:-/work/sweep_wt29}  # a frozen checkout of 0f94b38 (git worktree add --detach)
OUT=runs/sweeps/s29_alfworld_D
P="-p PRESET tiny -p INTERACTIVE false -p THREADS 1 -p ITERATIONS 1000 -p MAX_ENV_STEPS 40000 -p LR 0.00003"
P="$P -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120"
P="$P -p FINAL_EVAL_SAMPLED true -p ENV alfworld -p SFT_UPDATES 1536 -p MAX_STEPS 30"
cell() {  # algo swap seed
  echo "$(date) start alfworld $1 SWAP=$2 SEED=$3"
  (cd "$WT" && PYTHONPATH=$WT RSPO_KIT_CACHE=/work/main/.cache OMP_NUM_THREADS=1 \
    /work/main/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
    --grid "{\"ALGO\": [\"$1\"], \"SWAP\": [$2], \"SEED\": [$3]}" --out /work/main/$OUT --workers 1 $P)
  echo "$(date) end alfworld $1 SWAP=$2 SEED=$3 rc=$?"
}
case "$1" in
  a) for s in 0 1 2; do cell grpo false $s; cell grpo '"mix"' $s; cell ppo '"process"' $s; done ;;
  b) for s in 0 1 2; do cell grpo '"process"' $s; cell ppo false $s; cell ppo '"mix"' $s; done ;;
  cell) cell "$2" "$3" "$4" ;;
  *) echo "usage: lanes.sh a|b | cell ALGO SWAP SEED"; exit 2 ;;
esac
