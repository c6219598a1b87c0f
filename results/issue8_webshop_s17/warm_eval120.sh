#!/bin/bash
# the WebShop warm start (session 13) on all 120 tasks of eval and eval_unseen, greedy and sampled, cap 15,
# seed 0: what the sweep's final evaluations compare with
cd /work/main
export OMP_NUM_THREADS=1
for s in eval eval_unseen; do
  .venv/bin/python -m rspo_kit.policy.evaluate --policy runs/s13/L_webshop_chosen_2t/policy --env webshop --n 120 --max-steps 15 --split $s > runs/s17/warm_${s}_greedy.json 2>/dev/null
  .venv/bin/python -m rspo_kit.policy.evaluate --policy runs/s13/L_webshop_chosen_2t/policy --env webshop --n 120 --max-steps 15 --split $s --sampled > runs/s17/warm_${s}_sampled.json 2>/dev/null
done
