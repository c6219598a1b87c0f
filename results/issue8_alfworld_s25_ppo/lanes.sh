#!/bin/bash
# s25: ALFWorld PPO at 40k env steps, seed 0 (the same warm start and parameters as `make sweep` and sessions
# 22-24's GiGPO cells, -p THREADS 1). Two lanes of one thread each: lane a = PPO + RSPO, lane b = plain PPO;
# lane c = the PPO control (for a later session). Usage: lanes.sh a|b|c [SEED]
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s25_alfworld_ppo
P="-p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 40000 -p LR 0.00003 -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 -p FINAL_EVAL_SAMPLED true -p ENV alfworld -p SFT_UPDATES 1536 -p MAX_STEPS 30 -p THREADS 1"
SEED=${2:-0}
cell() {  # swap
  echo "$(date) start PPO SWAP=$1 SEED=$SEED"
  .venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
    --grid "{\"ALGO\": [\"ppo\"], \"SWAP\": [$1], \"SEED\": [$SEED]}" --out $OUT --workers 1 $P
  echo "$(date) end PPO SWAP=$1 SEED=$SEED rc=$?"
}
case "$1" in
  a) cell true ;;
  b) cell false ;;
  c) cell '"control"' ;;
  *) echo "usage: lanes.sh a|b|c [SEED]"; exit 2 ;;
esac
