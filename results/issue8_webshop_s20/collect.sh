#!/bin/bash
# issue 8, session 20: WebShop under session 18's protocol (score / 100 as the outcome, 7k env steps), read as one
# sweep with sessions 18-19 (report OUT OUT2 ...): PPO seeds 1-2, and two ablations of GRPO on seeds 0-2 — the
# control without replay (REPLAY_RATIO 0) and RSPO without importance weights on replayed steps (OFFPOLICY_WEIGHT
# none). One cell: results/issue8_webshop_s20/sweep_cell.sh ALGO SWAP SEED [EXTRA_GRID_JSON] -> results/
set -e
cd "$(dirname "$0")/../.."  # the repository root
S="runs/sweeps/s18_webshop_7k runs/sweeps/s19_webshop_7k runs/sweeps/s20_webshop_7k"
R=results/issue8_webshop_s20
P=results/issue8_webshop_s19  # the probe scripts and the earlier runs' probe results
mkdir -p $R runs/s20
M="final_eval_score final_eval_unseen_score final_eval_success final_eval_unseen_success"
M="$M final_sampled_eval_score final_sampled_eval_unseen_score final_sampled_eval_success final_sampled_eval_unseen_success"
.venv/bin/python -m rspo_kit.experiments.report $S --statistics --metrics $M \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false \
  --paired REPLAY_RATIO=0.0,null --paired 'OFFPOLICY_WEIGHT=none,""' > $R/report.md
.venv/bin/python - <<'PY'
from rspo_kit.experiments.report import _frame, pooled_sweep, sweep_statistics
S = ["runs/sweeps/s18_webshop_7k", "runs/sweeps/s19_webshop_7k", "runs/sweeps/s20_webshop_7k"]
manifest, rows, folders = pooled_sweep(S)
scalar = lambda v: isinstance(v, (int, float, str, bool)) or v is None
_frame([{k: v for k, v in r.items() if scalar(v)} for r in rows], manifest["keys"]).to_csv(
    "results/issue8_webshop_s20/results.csv", index=False)
sweep_statistics(S[0], (manifest, rows), folders).to_csv("results/issue8_webshop_s20/run_statistics.csv", index=False)
PY
# this session's cells (PPO seeds 1-2, the ablations): the valid score curves against env steps
.venv/bin/python -c "from rspo_kit.experiments import aggregate; aggregate('runs/sweeps/s20_webshop_7k', curve='curve_score')"
cp runs/sweeps/s20_webshop_7k/curves.html $R/
# each ablation against the other variants of its seed (report.md pairs each with its own variant only)
.venv/bin/python - <<'PY' > $R/paired_ablations.md
import pandas as pd
from rspo_kit.experiments import mean_ci
t = pd.read_csv("results/issue8_webshop_s20/results.csv")
t = t[t["ALGO"] == "grpo"].assign(SWAP=lambda d: d["SWAP"].astype(str).str.lower())
t["variant"] = t["SWAP"] + t["REPLAY_RATIO"].map(lambda r: "" if pd.isna(r) else f", replay {r:g}") + t[
    "OFFPOLICY_WEIGHT"].map(lambda w: "" if pd.isna(w) else f", weights {w}")
M = ["final_eval_score", "final_eval_unseen_score", "final_sampled_eval_score", "final_sampled_eval_unseen_score"]
print("| GRPO, WebShop: difference (score points) | seeds | " + " | ".join(M) + " |")
print("|---|---|" + "---|" * len(M))
by = t.set_index(["variant", "SEED"])
for a in ("control, replay 0", "true, weights none"):
    for b in ("false", "true", "control"):
        seeds = sorted(s for v, s in by.index if v == a and (b, s) in by.index)
        cells = []
        for m in M:
            d = [by.at[(a, s), m] - by.at[(b, s), m] for s in seeds]
            mean, lo, hi = mean_ci(d)
            cells.append(" / ".join(f"{x:+.1f}" for x in d) + (f" → {mean:+.1f} [{lo:+.1f}, {hi:+.1f}]" if len(d) > 1 else ""))
        print(f"| {a} − {b} | {', '.join(map(str, seeds))} | " + " | ".join(cells) + " |")
PY
# the ablations' actors on the same states as sessions 18-19's (state_probe.py), and the navigation drift of their
# training episodes (advantage_diag.py)
A=runs/sweeps/s20_webshop_7k
abl=$(for f in $(ls -d $A/*ALGO=grpo__SWAP=* | grep -v "ipynb\|log"); do grep -qs RSPO_RESULTS $f.ipynb && echo $f; done)  # finished
args=""; for f in $abl; do  # probe the runs no earlier probe of this session has (cells finish at different times)
  name=$(basename $f | sed 's/LR=0.0001__SEED=\([0-9]\)__ALGO=\([a-z]*\)__SWAP=\([a-z]*\)__\([A-Z_]*\)=\(.*\)/\2_\3_\4-\5_s\1/')
  grep -qs "\"$name\"" runs/s20/state_probe_ablations_*.json || args="$args $name=$f"; done
[ -z "$args" ] || OMP_NUM_THREADS=1 .venv/bin/python $P/state_probe.py runs/s20/state_probe_ablations_$(date +%H%M%S).json \
  runs/s18/W_webshop_u1284/policy $args
.venv/bin/python -c "import glob, json; d = {}; [d.update(json.load(open(f))) for f in sorted(glob.glob('runs/s20/state_probe_ablations_*.json'))]; json.dump(d, open('$R/state_probe_ablations.json', 'w'), indent=1)"
.venv/bin/python $P/advantage_diag.py $R/advantage_ablations.json $abl > /dev/null
.venv/bin/python - <<'PY' > $R/mechanism.md
import json
from rspo_kit.experiments import mean_ci
R, P = "results/issue8_webshop_s20", "results/issue8_webshop_s19"
old, new = json.load(open(f"{P}/state_probe_grpo.json")), json.load(open(f"{R}/state_probe_ablations.json"))
drift = json.load(open(f"{P}/advantage_grpo.json")) | json.load(open(f"{R}/advantage_ablations.json"))
probe = old | {k: v for k, v in new.items() if k != "warm"}
def show(values, sign=""):
    m, lo, hi = mean_ci([100 * v for v in values])
    return f"{m:{sign}.1f} [{lo:{sign}.1f}, {hi:{sign}.1f}]" if len(values) > 1 else f"{m:{sign}.1f}"
# probe name -> (the run folder's name ends with, label)
VARIANTS = {"false": ("SWAP=false", "plain"), "true": ("SWAP=true", "RSPO"), "control": ("SWAP=control", "control"),
            "control_REPLAY_RATIO-0.0": ("SWAP=control__REPLAY_RATIO=0.0", "control, replay off"),
            "true_OFFPOLICY_WEIGHT-none": ("SWAP=true__OFFPOLICY_WEIGHT=none", "RSPO, no importance weights")}
print("| GRPO, WebShop | seeds | P(navigate) on item pages | P(buy) on item pages | argmax is navigation "
      "| navigation share of the actor's steps, thirds of the run | of the replayed steps |")
print("|---|---|---|---|---|---|---|")
w = old["warm"]["item"]
print(f"| warm start | — | {100 * w['p_navigate']:.1f} | {100 * w['p_buy']:.1f} | {100 * w['argmax_navigate']:.1f} | | |")
for variant, (suffix, label) in VARIANTS.items():
    names = [f"grpo_{variant}_s{s}" for s in range(5) if f"grpo_{variant}_s{s}" in probe]
    runs = [f"LR=0.0001__SEED={s}__ALGO=grpo__{suffix}" for s in range(5)]
    runs = [r for r in runs if r in drift]
    item = [probe[n]["item"] for n in names]
    thirds = lambda role: " → ".join(show([drift[r]["navigation_share_by_third"][role][i] for r in runs]) for i in range(3)) \
        if runs and all(role in drift[r]["navigation_share_by_third"] for r in runs) else ""
    print(f"| {label} | {len(names)} | {show([x['p_navigate'] for x in item])} | {show([x['p_buy'] for x in item])} | "
          f"{show([x['argmax_navigate'] for x in item])} | {thirds('actor')} | {thirds('replay')} |")
print("\nPaired by seed on the same states (percentage points):\n")
print("| difference | seeds | P(navigate) on item pages | argmax is navigation | argmax is buy |")
print("|---|---|---|---|---|")
for a, b in (("control_REPLAY_RATIO-0.0", "control"), ("control_REPLAY_RATIO-0.0", "false"),
             ("true_OFFPOLICY_WEIGHT-none", "true"), ("true_OFFPOLICY_WEIGHT-none", "control")):
    seeds = [s for s in range(5) if f"grpo_{a}_s{s}" in probe and f"grpo_{b}_s{s}" in probe]
    diff = lambda m: [probe[f"grpo_{a}_s{s}"]["item"][m] - probe[f"grpo_{b}_s{s}"]["item"][m] for s in seeds]
    print(f"| {VARIANTS[a][1]} − {VARIANTS[b][1]} | {', '.join(map(str, seeds))} | {show(diff('p_navigate'), '+')} | {show(diff('argmax_navigate'), '+')} "
          f"| {show(diff('argmax_buy'), '+')} |")
PY
cat $R/report.md $R/paired_ablations.md $R/mechanism.md
