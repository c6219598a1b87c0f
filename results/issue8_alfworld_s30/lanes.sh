#!/bin/bash
# issue 8, session 30: every ALFWorld cell still missing for 3 seeds of the process-only and mix baselines beside
# plain, on warm start D (results/warm_starts/alfworld_D, 16f7a37f1d66), under session 29's protocol
# (results/issue8_alfworld_s29/lanes.sh: `make sweep`'s, lr 3e-5, 40k env steps, cap 30, one thread a cell,
# checkout 0f94b38): GRPO and PPO first (what session 29's lanes a / b leave), then GiGPO's nine (plain, process
# only, mix). Runs on any machine: it installs D into the cache (an error if the cache holds other weights under
# D's key), creates the frozen checkout if missing, and skips cells archived in results/issue8_alfworld_s29/sweep_D
# and cells finished in SWEEP_OUT. On a machine other than session 29's, set SWEEP_OUT to a new folder (an
# archive's manifest is its sweep folder's: two folders, two archives, pooled by `report`). Collect with
# `SWEEP_OUT=<the same> bash results/issue8_alfworld_s30/collect.sh` as cells finish.
# Usage: lanes.sh a|b | cell ALGO SWAP SEED   (SWAP as in a grid: false, '"process"')
cd "$(dirname "$0")/../.."  # the repository root
ROOT=$PWD
WT=${SWEEP_WORKTREE:-/work/sweep_wt29}
OUT=${SWEEP_OUT:-runs/sweeps/s29_alfworld_D}
ARCHIVED=results/issue8_alfworld_s29/sweep_D
[ -d "$WT" ] || git worktree add --detach "$WT" 0f94b38 || exit 1
RSPO_KIT_CACHE=$ROOT/.cache OMP_NUM_THREADS=1 .venv/bin/python -m rspo_kit.train --preset tiny --env alfworld \
  policy.sft_updates=1536 env.max_steps=30 train.iterations=0 train.eval_n=0 train.final_eval_split= \
  train.run_dir=runs/install_D --warmstart-from results/warm_starts/alfworld_D/policy > /dev/null || exit 1
P="-p PRESET tiny -p INTERACTIVE false -p THREADS 1 -p ITERATIONS 1000 -p MAX_ENV_STEPS 40000 -p LR 0.00003"
P="$P -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 -p FINAL_EVAL_SPLIT eval,eval_unseen -p FINAL_EVAL_N 120"
P="$P -p FINAL_EVAL_SAMPLED true -p ENV alfworld -p SFT_UPDATES 1536 -p MAX_STEPS 30"
cell() {  # algo swap seed
  name="ALGO=$1__SWAP=${2//\"/}__SEED=$3"
  if [ -f "$ARCHIVED/$name/results.json" ]; then echo "$(date) archived already: $name"; return; fi
  echo "$(date) start alfworld $1 SWAP=$2 SEED=$3"
  (cd "$WT" && PYTHONPATH=$WT RSPO_KIT_CACHE=$ROOT/.cache OMP_NUM_THREADS=1 \
    $ROOT/.venv/bin/python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb \
    --grid "{\"ALGO\": [\"$1\"], \"SWAP\": [$2], \"SEED\": [$3]}" --out $ROOT/$OUT --workers 1 $P)
  echo "$(date) end alfworld $1 SWAP=$2 SEED=$3 rc=$?"
}
case "$1" in
  a) for s in 0 1 2; do cell grpo false $s; cell grpo '"mix"' $s; cell ppo '"process"' $s; done
     for s in 0 1 2; do cell gigpo false $s; done; cell gigpo '"process"' 2 ;;
  b) for s in 0 1 2; do cell grpo '"process"' $s; cell ppo false $s; cell ppo '"mix"' $s; done
     for s in 0 1; do cell gigpo '"process"' $s; done; for s in 0 1 2; do cell gigpo '"mix"' $s; done ;;
  cell) cell "$2" "$3" "$4" ;;
  *) echo "usage: lanes.sh a|b | cell ALGO SWAP SEED"; exit 2 ;;
esac
