#!/bin/bash
# issue 8, session 16: RSPO with an explorer that diverges from the actor (seed 0, session-11 warm start,
# actor lr 3e-4, 40k env steps) beside the session-15 seed-0 RSPO (explorer lr 5e-5), plain and control -> results/
set -e
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s16_alfworld_40k_s11_explorer
BASE=runs/sweeps/s15_alfworld_40k_s11
R=results/issue8_alfworld_s16_explorer
M="final_eval_success final_eval_unseen_success final_sampled_eval_success final_sampled_eval_unseen_success"
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M > $R/report.md
cp $OUT/results.csv $R/ 2>/dev/null || true
.venv/bin/python - <<'PY'
import pandas as pd
from pathlib import Path
from rspo_kit.records import load_metrics
OUT, BASE, R = "runs/sweeps/s16_alfworld_40k_s11_explorer", "runs/sweeps/s15_alfworld_40k_s11", "results/issue8_alfworld_s16_explorer"
runs = {f"s15 {v}, explorer lr 5e-5 x 1" if v == "rspo" else f"s15 {v}": f"{BASE}/SEED=0__ALGO=grpo__SWAP={s}"
        for v, s in (("plain", "false"), ("rspo", "true"), ("control", "control"))}
runs |= {d.name.split("__SEED")[0]: str(d) for d in sorted(Path(OUT).glob("EXPLORER_*")) if d.is_dir()}
keep = ["iteration", "rollout/cumulative_env_steps", "eval/success", "rollout/success", "swap/explorer_success",
        "swap/rescued_groups", "swap/replayed", "loss/approx_kl", "explorer/loss/approx_kl", "swap/process_outcome_tau",
        "swap/explorer_hacking_rate"]
frames = []
for name, d in runs.items():
    m = load_metrics(d)
    frames.append(m[[c for c in keep if c in m]].assign(run=name))
table = pd.concat(frames, ignore_index=True)
table.to_csv(f"{R}/metrics.csv", index=False)
import plotly.graph_objects as go
from plotly.subplots import make_subplots
fig = make_subplots(rows=1, cols=2, subplot_titles=(
    "greedy success on valid (40 tasks)", "explorer success − actor success (same tasks; 5-iteration mean)"))
for name, part in table.groupby("run", sort=False):
    x = part["rollout/cumulative_env_steps"]
    v = part.dropna(subset=["eval/success"])
    fig.add_scatter(x=v["rollout/cumulative_env_steps"], y=v["eval/success"], name=name, legendgroup=name,
                    mode="lines+markers", row=1, col=1)
    if "swap/explorer_success" in part:
        edge = (part["swap/explorer_success"] - part["rollout/success"]).rolling(5, min_periods=1).mean()
        fig.add_scatter(x=x, y=edge, name=name, legendgroup=name, showlegend=False, mode="lines", row=1, col=2)
fig.update_xaxes(title_text="env steps (actor + explorer)")
fig.update_layout(height=450, width=1200)
fig.write_html(f"{R}/curves.html", include_plotlyjs="cdn")
PY
cat $R/report.md
