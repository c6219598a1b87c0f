#!/bin/bash
# issue 8, session 19: GiGPO and PPO (plain / RSPO / control) on WebShop under session 18's GRPO protocol, 7k env
# steps, seeds 0-2 (one cell: results/issue8_webshop_s19/sweep_cell.sh ALGO SWAP SEED) -> results/
set -e
cd "$(dirname "$0")/../.."  # the repository root
OUT=runs/sweeps/s19_webshop_7k
R=results/issue8_webshop_s19
W=results/issue8_webshop_s18  # the same warm start (rebuilt bit for bit; its 120-goal evaluations are there)
mkdir -p $R
M="final_eval_score final_eval_unseen_score final_eval_success final_eval_unseen_success"
M="$M final_sampled_eval_score final_sampled_eval_unseen_score final_sampled_eval_success final_sampled_eval_unseen_success"
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false > $R/report.md
.venv/bin/papermill -k rspo-kit notebooks/06_experiments.ipynb $R/06_experiments.ipynb --cwd . \
  -p OUT $OUT -p RUN_CELLS False -p INTERACTIVE False -p METRIC final_eval_score -p CURVE curve_score \
  -y '{"GRID": {"LR": [0.0001], "SEED": [0, 1, 2], "ALGO": ["gigpo", "ppo"], "SWAP": [false, true, "control"]},
       "EXTRA_METRICS": ["final_eval_unseen_score", "final_eval_success", "final_eval_unseen_success",
                         "final_sampled_eval_score", "final_sampled_eval_unseen_score", "env_steps", "iterations"]}' \
  > $R/papermill.log 2>&1
rm -f $R/papermill.log
cp $OUT/results.csv $OUT/curves.html $OUT/summary_bars.html $R/
.venv/bin/python - <<'PY'
import pandas as pd
from rspo_kit.experiments.report import sweep_statistics
from rspo_kit.experiments.sweep import load_sweep
from rspo_kit.records import load_metrics
OUT, R = "runs/sweeps/s19_webshop_7k", "results/issue8_webshop_s19"
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
pd.concat(frames, ignore_index=True).to_csv(f"{R}/metrics.csv", index=False)
PY
# each variant against the warm start, per seed (RSPO − plain and RSPO − control, paired: report.md)
.venv/bin/python - <<'PY' > $R/paired.md
import json
import pandas as pd
from rspo_kit.experiments import mean_ci
R, W = "results/issue8_webshop_s19", "results/issue8_webshop_s18"
t = pd.read_csv(f"{R}/results.csv").assign(SWAP=lambda d: d["SWAP"].astype(str).str.lower())
warm = {f"final{'_sampled' if m == 'sampled' else ''}_{s}_score": json.load(open(f"{W}/warm_start_{s}_{m}.json"))["mean_score"]
        for s in ("eval", "eval_unseen") for m in ("greedy", "sampled")}
print("| difference (score points) | seeds | " + " | ".join(warm) + " |")
print("|---|---|" + "---|" * len(warm))
for (algo, swap), part in t.groupby(["ALGO", "SWAP"], sort=False):
    cells = []
    for metric in warm:
        m, lo, hi = mean_ci([v - warm[metric] for v in part[metric]])
        cells.append(f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]")
    print(f"| {algo}, SWAP={swap} − warm start | {', '.join(map(str, part['SEED']))} | " + " | ".join(cells) + " |")
# GRPO's process-only and mix baselines against session 18's plain GRPO and RSPO, same protocol, seed by seed
s18 = pd.read_csv(f"{W}/results.csv").assign(SWAP=lambda d: d["SWAP"].astype(str).str.lower()).set_index(["SWAP", "SEED"])
for swap in ("process", "mix"):
    part = t[(t["ALGO"] == "grpo") & (t["SWAP"] == swap)].set_index("SEED")
    for other in ("false", "true"):
        seeds = [s for s in part.index if (other, s) in s18.index]
        if not seeds:
            continue
        cells = []
        for metric in warm:
            m, lo, hi = mean_ci([part.at[s, metric] - s18.at[(other, s), metric] for s in seeds])
            cells.append(f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]")
        print(f"| grpo, SWAP={swap} − SWAP={other} (session 18) | {', '.join(map(str, seeds))} | " + " | ".join(cells) + " |")
PY
cat $R/report.md $R/paired.md
# why the control's greedy score falls (session 18's GRPO runs, and this session's GiGPO runs): the same-state probe
# (state_probe.py: the warm start's states on 40 valid goals, each final actor's choice distribution) and the
# navigation drift of the training episodes (advantage_diag.py, from each run's turn tables)
for algo in grpo gigpo; do
  S=runs/sweeps/s19_webshop_7k; [ $algo = grpo ] && S=runs/sweeps/s18_webshop_7k
  [ -f runs/s19/state_probe_$algo.json ] || { args=""; for f in $(ls -d $S/*ALGO=${algo}__SWAP=* | grep -v "ipynb\|log\|process\|mix"); do
    args="$args $(basename $f | sed 's/LR=0.0001__SEED=\([0-9]\)__ALGO=\([a-z]*\)__SWAP=\(.*\)/\2_\3_s\1/')=$f"; done
    OMP_NUM_THREADS=1 .venv/bin/python $R/state_probe.py runs/s19/state_probe_$algo.json runs/s18/W_webshop_u1284/policy $args; }
  .venv/bin/python $R/advantage_diag.py runs/s19/advantage_$algo.json \
    $(ls -d $S/*ALGO=${algo}__SWAP=* | grep -v "ipynb\|log\|process\|mix") > /dev/null
  cp runs/s19/state_probe_$algo.json runs/s19/advantage_$algo.json $R/
done
# the process-only and mix baselines on the same states
S=runs/sweeps/s19_webshop_7k
[ -f runs/s19/state_probe_baselines.json ] || { args=""; for f in $(ls -d $S/*ALGO=grpo__SWAP=* | grep -v "ipynb\|log"); do
  args="$args $(basename $f | sed 's/LR=0.0001__SEED=\([0-9]\)__ALGO=\([a-z]*\)__SWAP=\(.*\)/\2_\3_s\1/')=$f"; done
  OMP_NUM_THREADS=1 .venv/bin/python $R/state_probe.py runs/s19/state_probe_baselines.json runs/s18/W_webshop_u1284/policy $args; }
cp runs/s19/state_probe_baselines.json $R/
.venv/bin/python - <<'PY' > $R/mechanism.md
import json
from rspo_kit.experiments import mean_ci
R = "results/issue8_webshop_s19"
print("| algorithm | variant | seeds | P(navigate) on item pages | P(buy) on item pages | argmax is navigation "
      "| navigation share of the actor's steps, thirds of the run | of the replayed steps |")
print("|---|---|---|---|---|---|---|---|")
def show(values, scale=100, sign=""):
    m, lo, hi = mean_ci([scale * v for v in values])
    return f"{m:{sign}.1f} [{lo:{sign}.1f}, {hi:{sign}.1f}]" if len(values) > 1 else f"{m:{sign}.1f}"
warm = json.load(open(f"{R}/state_probe_grpo.json"))["warm"]["item"]  # the same states for every algorithm
print(f"| — | warm start | — | {100 * warm['p_navigate']:.1f} | {100 * warm['p_buy']:.1f} | "
      f"{100 * warm['argmax_navigate']:.1f} | | |")
for algo in ("grpo", "gigpo"):
    probe, drift = (json.load(open(f"{R}/{kind}_{algo}.json")) for kind in ("state_probe", "advantage"))
    for variant in ("false", "true", "control"):
        names = sorted(k for k in probe if k.startswith(f"{algo}_{variant}_s"))
        runs = sorted(k for k in drift if k.endswith(f"ALGO={algo}__SWAP={variant}"))
        if not names:
            continue
        item = [probe[n]["item"] for n in names]
        thirds = lambda role: " → ".join(
            show([drift[r]["navigation_share_by_third"][role][i] for r in runs]) for i in range(3)
        ) if all(role in drift[r]["navigation_share_by_third"] for r in runs) else ""
        print(f"| {algo} | {variant} | {len(names)} | {show([x['p_navigate'] for x in item])} | "
              f"{show([x['p_buy'] for x in item])} | {show([x['argmax_navigate'] for x in item])} | "
              f"{thirds('actor')} | {thirds('replay')} |")
base = json.load(open(f"{R}/state_probe_baselines.json"))
for variant in ("process", "mix"):
    item = [base[n]["item"] for n in sorted(base) if n.startswith(f"grpo_{variant}_s")]
    if item:
        print(f"| grpo | {variant} | {len(item)} | {show([x['p_navigate'] for x in item])} | "
              f"{show([x['p_buy'] for x in item])} | {show([x['argmax_navigate'] for x in item])} | | |")
print("\nPaired by seed on the same states (percentage points):\n")
print("| algorithm | difference | seeds | P(navigate) on item pages | argmax is navigation | argmax is buy |")
print("|---|---|---|---|---|---|")
for algo in ("grpo", "gigpo"):
    probe = json.load(open(f"{R}/state_probe_{algo}.json"))
    for a, b in (("control", "true"), ("control", "false"), ("true", "false")):
        seeds = [n.rsplit("_s", 1)[1] for n in probe if n.startswith(f"{algo}_{a}_s")]
        seeds = [s for s in seeds if f"{algo}_{b}_s{s}" in probe]
        diff = lambda m: [probe[f"{algo}_{a}_s{s}"]["item"][m] - probe[f"{algo}_{b}_s{s}"]["item"][m] for s in seeds]
        print(f"| {algo} | {a} − {b} | {', '.join(seeds)} | {show(diff('p_navigate'), sign='+')} | "
              f"{show(diff('argmax_navigate'), sign='+')} | {show(diff('argmax_buy'), sign='+')} |")
PY
cat $R/mechanism.md
