#!/bin/bash
# issue 8, sessions 29-30 -> results/issue8_alfworld_s29/ (rerun as cells of results/issue8_alfworld_s30/lanes.sh
# finish): ALFWorld's process-only and mix baselines beside plain, every base algorithm, on warm start D.
# SWEEP_OUT as given to lanes.sh. Its archive goes to results/issue8_alfworld_s29/sweep_D when it is session 29's
# folder (runs/sweeps/s29_alfworld_D, the default), else to results/issue8_alfworld_s30/sweep_<its name>, and
# the report pools every archive with it:
#  - report.md: every finished cell by seed, each variant − warm start D task by task
#    (results/issue8_webshop_s28/alfworld_warmstart_D), process − plain and mix − plain by seed and task by task,
#    the swap statistics, and how far the unfinished cells got; results.csv, run_statistics.csv; curves.html
#  - 06_experiments.ipynb: notebook 06 executed on the archives (notebook06.sh)
set -e
cd "$(dirname "$0")/../.."  # the repository root
R=results/issue8_alfworld_s29
OUT=${SWEEP_OUT:-runs/sweeps/s29_alfworld_D}
if [ "$OUT" = runs/sweeps/s29_alfworld_D ]; then ARCHIVE=$R/sweep_D; else ARCHIVE=results/issue8_alfworld_s30/sweep_$(basename $OUT); fi
[ -d "$OUT" ] && .venv/bin/python -m rspo_kit.experiments.archive $OUT $ARCHIVE
# the report reads the live folder (how far unfinished cells got) with every other archive
FOLDERS="$OUT $(ls -d $R/sweep_D results/issue8_alfworld_s30/sweep_* 2>/dev/null | grep -vx "$ARCHIVE" | tr '\n' ' ')"
[ -d "$OUT" ] || FOLDERS="$(ls -d $R/sweep_D results/issue8_alfworld_s30/sweep_* 2>/dev/null | tr '\n' ' ')"
D=results/issue8_webshop_s28/alfworld_warmstart_D
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
M="$M start_success iterations"
.venv/bin/python -m rspo_kit.experiments.report $FOLDERS --statistics --metrics $M --reference $D \
  --curves $R/curves.html --paired SWAP=process,false --paired SWAP=mix,false > $R/report.md
FOLDERS="$FOLDERS" R=$R .venv/bin/python - <<'PY'
import os
import pandas as pd
from rspo_kit.experiments.report import pooled_sweep, sweep_statistics

R, folders = os.environ["R"], os.environ["FOLDERS"].split()
manifest, rows, cells = pooled_sweep(folders)
pd.DataFrame([{k: v for k, v in r.items() if not isinstance(v, (list, dict))} for r in rows]).to_csv(
    f"{R}/results.csv", index=False)
sweep_statistics(None, (manifest, rows), cells).to_csv(f"{R}/run_statistics.csv", index=False)
PY
rm -f $R/plotly.min.js  # the page falls back to the CDN's copy of the same version
cat $R/report.md
# the executed summary notebook over the archives: results/issue8_alfworld_s29/06_experiments.ipynb
bash results/issue8_alfworld_s30/notebook06.sh > /dev/null 2>&1 || echo "notebook 06 failed: rerun results/issue8_alfworld_s30/notebook06.sh"
