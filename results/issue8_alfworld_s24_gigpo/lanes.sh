#!/bin/bash
# s24: ALFWorld GiGPO seed 2 of plain and RSPO into session 22's sweep folder (same warm start, same parameters as
# `make sweep`, -p THREADS 1), completing 3 seeds x {plain, RSPO, control}. Two lanes of one thread each:
# lane a = RSPO s2, lane b = plain s2. Usage: lanes.sh a|b
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s22_alfworld_gigpo
P="-p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 40000 -p LR 0.00003 -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 -p FINAL_EVAL_SAMPLED true -p ENV alfworld -p SFT_UPDATES 1536 -p MAX_STEPS 30 -p THREADS 1"
cell() {  # swap seed
  echo "$(date) start SWAP=$1 SEED=$2"
  .venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
    --grid "{\"ALGO\": [\"gigpo\"], \"SWAP\": [$1], \"SEED\": [$2]}" --out $OUT --workers 1 $P
  echo "$(date) end SWAP=$1 SEED=$2 rc=$?"
}
case "$1" in
  a) cell true 2 ;;
  b) cell false 2 ;;
esac
