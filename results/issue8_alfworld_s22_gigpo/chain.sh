#!/bin/bash
# s22: when the plain cell finishes, start the control in its core (same OUT, same parameters)
cd /work/main
OUT=runs/sweeps/s22_alfworld_gigpo
P="-p PRESET tiny -p INTERACTIVE false -p ITERATIONS 1000 -p MAX_ENV_STEPS 40000 -p LR 0.00003 -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120 -p FINAL_EVAL_SAMPLED true -p ENV alfworld -p SFT_UPDATES 1536 -p MAX_STEPS 30 -p THREADS 1"
done_cell() { .venv/bin/python -m rspo_kit.experiments.results "$OUT/$1.ipynb" > /dev/null 2>&1; }
until done_cell "ALGO=gigpo__SWAP=false__SEED=0"; do sleep 20; done
echo "$(date) plain done; starting control"
.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb --grid '{"ALGO": ["gigpo"], "SWAP": ["control"], "SEED": [0]}' \
  --out $OUT --workers 1 $P > runs/s22_control.log 2>&1
echo "$(date) control done"
