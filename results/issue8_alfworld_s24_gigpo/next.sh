#!/bin/bash
# s24, second wave (one thread each, the same warm start and parameters as lanes.sh), each into its own
# folder so that `report s22_alfworld_gigpo FOLDER` pools them with sessions 22-24's cells:
#   process: GiGPO on the process reward only (the baseline ALFWorld lacked), seed 0
#   replay_off: the control with its replay off (REPLAY_RATIO 0: its explorer still spends its share of
#     the budget, nothing it finds reaches the actor), seed 0 — how much of the control's lead is its replay
# usage: next.sh process|replay_off [SEED]
cd "$(dirname "$0")/../.."  # the repository root
P="-p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 40000 -p LR 0.00003 -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 -p FINAL_EVAL_SAMPLED true -p ENV alfworld -p SFT_UPDATES 1536 -p MAX_STEPS 30 -p THREADS 1"
SEED=${2:-0}
case "$1" in
  process) GRID="{\"ALGO\": [\"gigpo\"], \"SWAP\": [\"process\"], \"SEED\": [$SEED]}"; OUT=runs/sweeps/s24_alfworld_process ;;
  replay_off) GRID="{\"ALGO\": [\"gigpo\"], \"SWAP\": [\"control\"], \"SEED\": [$SEED], \"REPLAY_RATIO\": [0.0]}"
              OUT=runs/sweeps/s24_alfworld_replay_off ;;
  *) echo "usage: next.sh process|replay_off [SEED]"; exit 2 ;;
esac
echo "$(date) start $1 SEED=$SEED"
.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb --grid "$GRID" --out $OUT --workers 1 $P
echo "$(date) end $1 SEED=$SEED rc=$?"
