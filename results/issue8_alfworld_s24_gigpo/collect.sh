#!/bin/bash
# issue 8, sessions 22-24: ALFWorld GiGPO plain, RSPO and control, seeds 0-2, under `make sweep`'s protocol
# (warm start by 1,536 SFT updates, lr 3e-5, 40k env steps, valid curves, 120 tasks of eval and eval_unseen
# greedy and sampled), each against the warm start task by task; and session 24's second wave (process only;
# the control with its replay off), pooled with them -> results/issue8_alfworld_s24_gigpo/
# The cells: lanes.sh (seed 2 of plain and RSPO, into session 22's folder; seeds 0-1 and the control's seeds
# are ../issue8_alfworld_s22_gigpo and ../issue8_alfworld_s23_gigpo) and next.sh (process, replay_off).
# The warm start's final evaluation: what `make sweep` now runs before the cells (-> OUT/warmstart_run):
#   .venv/bin/python -m rspo_kit.train --preset tiny --env alfworld train.iterations=0 train.eval_n=0 \
#     policy.sft_updates=1536 env.max_steps=30 train.final_eval_split=eval,eval_unseen train.final_eval_n=120 \
#     train.final_eval_sampled=true train.run_dir=runs/s24/warm_eval
#   (then its final_episodes.parquet copied into OUT/warmstart_run, which session 22 built without it)
set -e
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s22_alfworld_gigpo
R=results/issue8_alfworld_s24_gigpo
WARM=$OUT/warmstart_run
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
M="$M start_success best_success env_steps iterations"
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M --reference $WARM \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false > $R/report.md
MORE=$(ls -d runs/sweeps/s24_alfworld_process runs/sweeps/s24_alfworld_replay_off 2>/dev/null || true)
if [ -n "$MORE" ]; then
  .venv/bin/python -m rspo_kit.experiments.report $OUT $MORE --statistics --metrics $M --reference $WARM \
    --paired SWAP=process,false --paired SWAP=process,true --paired REPLAY_RATIO=0.0,null \
    --paired 'SWAP="control"&REPLAY_RATIO=0.0,SWAP=false' --paired 'SWAP="control"&REPLAY_RATIO=0.0,SWAP=true' \
    > $R/report_second_wave.md || true
fi
.venv/bin/python - <<'PY'
import glob, os
import pandas as pd
from rspo_kit.experiments import aggregate
from rspo_kit.experiments.report import sweep_statistics
OUT, R = "runs/sweeps/s22_alfworld_gigpo", "results/issue8_alfworld_s24_gigpo"
aggregate(OUT).to_csv(f"{R}/results.csv", index=False)  # also writes the sweep's curves.html
sweep_statistics(OUT).to_csv(f"{R}/run_statistics.csv", index=False)
frames = [
    pd.read_json(f, lines=True).assign(cell=os.path.basename(os.path.dirname(f)), sweep=f.split("/")[2])
    for f in sorted(glob.glob("runs/sweeps/s2[24]_alfworld_*/ALGO=*/metrics.jsonl"))
]
pd.concat(frames).to_csv(f"{R}/metrics.csv", index=False)
PY
cp $OUT/curves.html $R/
# notebook 06 in summary mode (no cell runs): the table, the paired differences, against the warm start
.venv/bin/papermill -k rspo-kit notebooks/06_experiments.ipynb $R/06_experiments.ipynb --cwd . \
  -p OUT $OUT -p RUN_CELLS False -p INTERACTIVE False -p METRIC final_eval_success \
  -y '{"GRID": {"ALGO": ["gigpo"], "SWAP": [false, true, "control"], "SEED": [0, 1, 2]},
       "EXTRA_METRICS": ["final_eval_unseen_success", "final_sampled_eval_success", "final_sampled_eval_unseen_success",
                         "start_success", "best_success", "env_steps", "iterations"]}' > /dev/null 2>&1
cp $OUT/summary_bars.html $R/ 2>/dev/null || true
# the misalignment debugger (notebook 05, reads the turn tables; seconds) on RSPO's seed 2 and the process-only run
nb05() {  # run_folder name
  .venv/bin/papermill -k rspo-kit notebooks/05_misalignment_debugger.ipynb $R/05_misalignment_$2.ipynb --cwd . \
    -p DEBUG_RUN "$1" -p INTERACTIVE False -p THREADS 1 > /dev/null 2>&1 || echo "notebook 05 failed on $1"
}
nb05 "$OUT/ALGO=gigpo__SWAP=true__SEED=2" seed2_rspo
P0=runs/sweeps/s24_alfworld_process/ALGO=gigpo__SWAP=process__SEED=0
if [ -d $P0 ]; then nb05 $P0 seed0_process; fi
ls -la $R; cat $R/report.md
