#!/bin/bash
# the session-18 WebShop warm start on all 120 tasks of eval and eval_unseen, greedy and sampled, cap 15, seed 0
# (what the sweep's final evaluations compare with). usage: warm_eval120.sh SPLIT
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
P=runs/s18/W_webshop_u1284/policy
.venv/bin/python -m rspo_kit.policy.evaluate --policy $P --env webshop --n 120 --max-steps 15 --split $1 > runs/s18/warm_$1_greedy.json 2>/dev/null
.venv/bin/python -m rspo_kit.policy.evaluate --policy $P --env webshop --n 120 --max-steps 15 --split $1 --sampled > runs/s18/warm_$1_sampled.json 2>/dev/null
