#!/bin/bash
# s26: the cells sessions 24-25 left for 3 seeds on ALFWorld, under `make sweep`'s protocol (the warm start by
# 1,536 SFT updates, .cache/warmstart/alfworld_tiny_eaf079b86b94, rebuilt here into
# runs/sweeps/s26_alfworld/warmstart_run; lr 3e-5, 40k env steps, -p THREADS 1). Two lanes of one thread each:
#   lane a: PPO + RSPO seed 2, then plain PPO seed 2 (lanes.sh cell ppo false 2: the warm start did not
#     rebuild identically on this fresh machine, so seed 2 of this session pairs only with itself)
#   lane b: the PPO control seed 2, then GiGPO on the process reward only, seed 1
# Usage: lanes.sh a|b   (or lanes.sh cell ALGO SWAP SEED for one cell; SWAP as in a grid: true, '"control"')
cd "$(dirname "$0")/../.."  # the repository root
P="-p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 40000 -p LR 0.00003 -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 -p FINAL_EVAL_SAMPLED true -p ENV alfworld -p SFT_UPDATES 1536 -p MAX_STEPS 30 -p THREADS 1"
cell() {  # algo swap seed
  local out=runs/sweeps/s26_alfworld_$1
  echo "$(date) start $1 SWAP=$2 SEED=$3"
  .venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
    --grid "{\"ALGO\": [\"$1\"], \"SWAP\": [$2], \"SEED\": [$3]}" --out $out --workers 1 $P
  echo "$(date) end $1 SWAP=$2 SEED=$3 rc=$?"
}
case "$1" in
  a) cell ppo true 2; cell ppo false 2 ;;
  b) cell ppo '"control"' 2; cell gigpo '"process"' 1 ;;
  cell) cell "$2" "$3" "$4" ;;
  *) echo "usage: lanes.sh a|b | cell ALGO SWAP SEED"; exit 2 ;;
esac
