#!/bin/bash
# issue 8, session 18: GRPO plain / RSPO / control on WebShop, partial credit as the outcome, 7k env steps, 5 seeds
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
  -y '{"GRID": {"LR": [0.0001], "SEED": [0, 1, 2, 3, 4], "ALGO": ["grpo"], "SWAP": [false, true, "control"]},
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
import numpy as np
fig = make_subplots(rows=1, cols=3, subplot_titles=(
    "greedy mean score on valid (40 tasks)", "actor's sampled score (5-iteration mean)",
    "explorer score − actor score (same tasks; 5-iteration mean)"))
grid = np.arange(0, 7001, 250)  # each variant's mean over seeds, interpolated onto common env steps
colors = {"false": "#636efa", "true": "#ef553b", "control": "#00cc96"}
table["variant"] = table["run"].str.extract(r"SWAP=(\w+)")[0]
for variant, runs in table.groupby("variant", sort=False):
    curves = {1: [], 2: [], 3: []}
    for name, part in runs.groupby("run", sort=False):
        x = part["rollout/cumulative_env_steps"].to_numpy()
        v = part.dropna(subset=["eval/score"])
        series = {1: (v["rollout/cumulative_env_steps"].to_numpy(), v["eval/score"].to_numpy()),
                  2: (x, part["rollout/score"].rolling(5, min_periods=1).mean().to_numpy())}
        if "explorer_rollout/score" in part and part["explorer_rollout/score"].notna().any():
            series[3] = (x, (part["explorer_rollout/score"] - part["rollout/score"]).rolling(5, min_periods=1).mean().to_numpy())
        for col, (xs, ys) in series.items():
            ok = ~np.isnan(ys)
            fig.add_scatter(x=xs[ok], y=ys[ok], mode="lines", line=dict(color=colors[variant], width=0.7), opacity=0.3,
                            legendgroup=variant, showlegend=False, hoverinfo="skip", row=1, col=col)
            inside = grid[(grid >= xs[ok].min()) & (grid <= xs[ok].max())]
            curves[col].append(pd.Series(np.interp(inside, xs[ok], ys[ok]), index=inside))
    for col, parts in curves.items():
        if parts:
            mean = pd.concat(parts, axis=1).mean(axis=1)
            fig.add_scatter(x=mean.index, y=mean.values, mode="lines", name=f"SWAP={variant} (mean of seeds)",
                            line=dict(color=colors[variant], width=3), legendgroup=variant, showlegend=col == 1,
                            row=1, col=col)
fig.update_xaxes(title_text="env steps (actor + explorer)")
fig.update_layout(height=450, width=1500)
fig.write_html(f"{R}/training_curves.html", include_plotlyjs="cdn")
PY
ls -la $R; cat $R/report.md
# paired differences per seed (same seed, same warm start): RSPO − plain, RSPO − control, plain − warm start
.venv/bin/python - <<'PY' > $R/paired.md
import json
import pandas as pd
from rspo_kit.experiments import mean_ci
R = "results/issue8_webshop_s18"
t = pd.read_csv(f"{R}/results.csv").assign(SWAP=lambda d: d["SWAP"].astype(str).str.lower())
warm = {f"final{'_sampled' if m == 'sampled' else ''}_{s}_score": json.load(open(f"{R}/warm_start_{s}_{m}.json"))["mean_score"]
        for s in ("eval", "eval_unseen") for m in ("greedy", "sampled")}
by = {v: part.set_index("SEED") for v, part in t.groupby("SWAP")}
print("| paired difference (score points) | seeds | " + " | ".join(warm) + " |")
print("|---|---|" + "---|" * len(warm))
for name, a, b in (("RSPO − plain", "true", "false"), ("RSPO − control", "true", "control"),
                   ("plain − warm start", "false", None), ("RSPO − warm start", "true", None),
                   ("control − warm start", "control", None)):
    seeds = sorted(set(by[a].index) & (set(by[b].index) if b else set(by[a].index)))
    cells = []
    for metric in warm:
        diff = [by[a].loc[s, metric] - (by[b].loc[s, metric] if b else warm[metric]) for s in seeds]
        m, lo, hi = mean_ci(diff)
        cells.append(f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]")
    print(f"| {name} | {', '.join(map(str, seeds))} | " + " | ".join(cells) + " |")
PY
cat $R/paired.md
# the success-outcome probe (sweep_cell_success.sh, seed 0): its report and results
P=runs/sweeps/s18_webshop_7k_success
.venv/bin/python -m rspo_kit.experiments.report $P --statistics --metrics $M > $R/success_probe_report.md
cp $P/results.csv $R/success_probe_results.csv
