#!/bin/bash
# the warm start of session 22's cells on all 120 tasks of eval and eval_unseen, greedy and sampled (one episode
# per task, seed 0), the same evaluation the cells' final_* columns hold -> warmstart_eval120.json
set -e
cd "$(dirname "$0")/../.."  # the repository root
W=$(ls -d .cache/warmstart/alfworld_tiny_*/policy | head -1)
R=results/issue8_alfworld_s22_gigpo
mkdir -p runs/s22
for split in eval eval_unseen; do
  OMP_NUM_THREADS=1 .venv/bin/python -m rspo_kit.policy.evaluate --policy "$W" --env alfworld --split $split \
    --n 120 --max-steps 30 2>/dev/null > runs/s22/warm_greedy_$split.json
  OMP_NUM_THREADS=1 .venv/bin/python -m rspo_kit.policy.evaluate --policy "$W" --env alfworld --split $split \
    --n 120 --max-steps 30 --sampled 2>/dev/null > runs/s22/warm_sampled_$split.json
done
.venv/bin/python - "$W" <<'PY' > $R/warmstart_eval120.json
import json, sys
out = {"policy": f"{sys.argv[1]} (make sweep's warm start: 1,536 SFT updates, cap 30)"}
for mode in ("greedy", "sampled"):
    for split in ("eval", "eval_unseen"):
        r = json.load(open(f"runs/s22/warm_{mode}_{split}.json"))
        out[f"{mode}_{split}"] = {k: r[k] for k in ("success", "ci_low", "ci_high", "tasks", "invalid_share", "mean_steps")}
print(json.dumps(out, indent=1))
PY
cat $R/warmstart_eval120.json
