#!/bin/bash
# issue 8, session 26 -> results/issue8_alfworld_s26/. On a fresh machine the warm start (same config, same
# cache key alfworld_tiny_eaf079b86b94) did not rebuild identically: warm start B here, A in sessions 22-25.
# The cells (lanes.sh): PPO plain, RSPO and control seed 2 and GiGPO process-only seed 1, all on B.
#  - report_ppo.md / report_process.md: this session's cells, against B task by task, PPO paired task by task
#  - report_ppo_3seeds.md: PPO seeds 0-1 (A, session 25's results.csv) with seed 2 (B), paired seed by seed
#    (each pair shares its warm start; plain seed 2 on A has no partner on A and is shown, not paired)
#  - sweep_ppo/, sweep_process/, warmstart_run/: archives (`rspo_kit.experiments.archive`) that `report` reads
#    like the sweeps, so a later session can pool seeds task by task
set -e
cd "$(dirname "$0")/../.."  # the repository root
R=results/issue8_alfworld_s26
PPO=runs/sweeps/s26_alfworld_ppo
PROC=runs/sweeps/s26_alfworld_gigpo
WARM=runs/sweeps/s26_alfworld/warmstart_run
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
M="$M start_success best_success env_steps iterations"
mkdir -p $R/warmstart_run
cp $WARM/final_episodes.parquet $WARM/metrics.jsonl $R/warmstart_run/
.venv/bin/python -m rspo_kit.experiments.archive $PPO $R/sweep_ppo
.venv/bin/python -m rspo_kit.experiments.archive $PROC $R/sweep_process
.venv/bin/python -m rspo_kit.experiments.report $PPO --statistics --metrics $M --reference $WARM \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false > $R/report_ppo.md
.venv/bin/python -m rspo_kit.experiments.report $PROC --statistics --metrics $M --reference $WARM > $R/report_process.md
.venv/bin/python - <<'PY'
import glob, os
import pandas as pd
from rspo_kit.experiments import aggregate
from rspo_kit.experiments.report import markdown_table, paired_table, sweep_statistics

R = "results/issue8_alfworld_s26"
M = ["final_eval_success", "final_eval_unseen_success", "final_sampled_eval_success",
     "final_sampled_eval_unseen_success", "start_success", "iterations"]
new = {out: aggregate(out) for out in ("runs/sweeps/s26_alfworld_ppo", "runs/sweeps/s26_alfworld_gigpo")}
pd.concat(new.values()).to_csv(f"{R}/results.csv", index=False)
pd.concat(sweep_statistics(out) for out in new).to_csv(f"{R}/run_statistics.csv", index=False)
frames = [pd.read_json(f, lines=True).assign(cell=os.path.basename(os.path.dirname(f)), sweep=f.split("/")[2])
          for f in sorted(glob.glob("runs/sweeps/s26_alfworld_*/ALGO=*/metrics.jsonl"))]
pd.concat(frames).to_csv(f"{R}/metrics.csv", index=False)

def swap(v):  # results.csv keeps the grid values as text
    return {"True": True, "False": False}.get(str(v), str(v))

old = pd.read_csv("results/issue8_alfworld_s25_ppo/results.csv").assign(WARM="A")
b = new["runs/sweeps/s26_alfworld_ppo"].assign(WARM="B")
table = pd.concat([old, b], ignore_index=True)
table["SWAP"] = table["SWAP"].map(swap).astype(object)
# seeds as "0", "1" (warm start A) and "2" (B); A's plain seed 2 becomes "2 (A)": shown, paired with nothing
table["SEED"] = [f"{s} (A)" if (w, s, v) == ("A", 2, False) else str(s)
                 for w, s, v in zip(table["WARM"], table["SEED"], table["SWAP"])]
table = table.sort_values("SEED", kind="stable")
pairs = [("SWAP", True, False), ("SWAP", True, "control"), ("SWAP", "control", False)]
text = [
    "ALFWorld PPO at 40k env steps, seeds 0-1 on warm start A (session 25), seed 2 on warm start B "
    "(session 26); plain PPO's seed 2 on A is listed as `2 (A)` and paired with nothing.",
    markdown_table(table, ["SWAP"], M),
    "Paired by seed (each pair shares its warm start and task draws):",
    paired_table(table, pairs, [], M),
]
open(f"{R}/report_ppo_3seeds.md", "w").write("\n\n".join(text) + "\n")
print("\n\n".join(text))
PY
# the misalignment debugger (notebook 05, reads the turn tables; seconds) on RSPO's seed 2
R2="$PPO/ALGO=ppo__SWAP=true__SEED=2"
if [ -f "$R2/final_episodes.parquet" ]; then
  .venv/bin/papermill -k rspo-kit notebooks/05_misalignment_debugger.ipynb $R/05_misalignment_seed2_rspo.ipynb \
    --cwd . -p DEBUG_RUN "$R2" -p INTERACTIVE False -p THREADS 1 > /dev/null 2>&1 || echo "notebook 05 failed"
fi
du -sh $R/*; cat $R/report_ppo.md
