#!/bin/bash
# issue 8, session 18: GRPO plain / RSPO / control on WebShop, partial credit as the outcome, 7k env steps, 3 seeds
# from the session-18 warm start (one cell: results/issue8_webshop_s18/sweep_cell.sh SWAP SEED) -> results/
set -e
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s18_webshop_7k
R=results/issue8_webshop_s18
mkdir -p $R
M="final_eval_score final_eval_unseen_score final_eval_success final_eval_unseen_success"
M="$M final_sampled_eval_score final_sampled_eval_unseen_score final_sampled_eval_success final_sampled_eval_unseen_success"
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M > $R/report.md
.venv/bin/papermill -k rspo-kit notebooks/06_experiments.ipynb $R/06_experiments.ipynb --cwd . \
  -p OUT $OUT -p RUN_CELLS False -p INTERACTIVE False -p METRIC final_eval_score -p CURVE curve_score \
  -y '{"GRID": {"LR": [0.0001], "SEED": [0, 1, 2], "ALGO": ["grpo"], "SWAP": [false, true, "control"]},
       "EXTRA_METRICS": ["final_eval_unseen_score", "final_eval_success", "final_eval_unseen_success",
                         "final_sampled_eval_score", "final_sampled_eval_unseen_score", "env_steps", "iterations"]}' \
  > $R/papermill.log 2>&1
rm -f $R/papermill.log
cp $OUT/results.csv $OUT/curves.html $OUT/summary_bars.html $R/
# the warm start on all 120 goals of each test split, greedy and sampled (results/issue8_webshop_s18/warm_eval120.sh, writing runs/s18/warm_*.json)
for f in runs/s18/warm_*.json; do cp "$f" "$R/warm_start_$(basename "$f" | sed 's/^warm_//')"; done
cp runs/s18/W_webshop_u1284/warmstart.json $R/warm_start_sft.json  # the SFT run: demonstrations, losses, 60-goal evaluation
# why greedy scores move (results/issue8_webshop_s18/greedy_diag.py on the warm start and seeds 0-2, 40 valid goals)
cp runs/s18/greedy_diag.json $R/greedy_diag.json
.venv/bin/python - <<'PY'
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from rspo_kit.experiments.report import sweep_statistics
from rspo_kit.experiments.sweep import load_sweep
from rspo_kit.records import load_metrics
OUT, R = "runs/sweeps/s18_webshop_7k", "results/issue8_webshop_s18"
sweep_statistics(OUT).to_csv(f"{R}/run_statistics.csv", index=False)
manifest, _ = load_sweep(OUT)
keep = ["iteration", "rollout/cumulative_env_steps", "eval/score", "eval/success", "rollout/score", "rollout/success",
        "explorer_rollout/score", "swap/explorer_success", "swap/admitted", "swap/replayed", "swap/rescued_groups",
        "loss/approx_kl", "explorer/loss/approx_kl", "swap/process_outcome_tau", "swap/explorer_hacking_rate"]
frames = []
for cell in manifest["cells"]:
    try:
        m = load_metrics(f"{OUT}/{cell}")
    except (FileNotFoundError, ValueError):
        continue
    frames.append(m[[c for c in keep if c in m]].assign(run=cell))
table = pd.concat(frames, ignore_index=True)
table.to_csv(f"{R}/metrics.csv", index=False)
fig = make_subplots(rows=1, cols=3, subplot_titles=(
    "greedy mean score on valid (40 tasks)", "actor's sampled score (10-iteration mean)",
    "explorer score − actor score (same tasks; 10-iteration mean)"))
for name, part in table.groupby("run", sort=False):
    x = part["rollout/cumulative_env_steps"]
    v = part.dropna(subset=["eval/score"])
    fig.add_scatter(x=v["rollout/cumulative_env_steps"], y=v["eval/score"], name=name, legendgroup=name,
                    mode="lines+markers", row=1, col=1)
    fig.add_scatter(x=x, y=part["rollout/score"].rolling(10, min_periods=1).mean(), name=name, legendgroup=name,
                    showlegend=False, mode="lines", row=1, col=2)
    if "explorer_rollout/score" in part:
        edge = (part["explorer_rollout/score"] - part["rollout/score"]).rolling(10, min_periods=1).mean()
        fig.add_scatter(x=x, y=edge, name=name, legendgroup=name, showlegend=False, mode="lines", row=1, col=3)
fig.update_xaxes(title_text="env steps (actor + explorer)")
fig.update_layout(height=450, width=1500)
fig.write_html(f"{R}/training_curves.html", include_plotlyjs="cdn")
PY
ls -la $R; cat $R/report.md
