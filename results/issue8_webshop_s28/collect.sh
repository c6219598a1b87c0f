#!/bin/bash
# issue 8, session 28 -> results/issue8_webshop_s28/ (run after lanes.sh's cells; rerun as more finish):
#  - report.md: every finished cell by seed, each variant − the warm start task by task (webshop_warmstart_run),
#    RSPO − plain / RSPO − control / control − plain / process − plain / mix − plain / RSPO − process task by task
#  - results.csv, run_statistics.csv, metrics.csv (every cell's training log), curves.html (valid score)
#  - sweep_webshop/, webshop_warmstart_run/: archives that `report` reads like the sweep
#  - warm_starts.md: the builds of session 18's WebShop recipe (session 18's on two threads, two here on one)
set -e
cd "$(dirname "$0")/../.."  # the repository root
R=results/issue8_webshop_s28
OUT=runs/sweeps/s28_webshop_7k
WARM=runs/s28/webshop_warmstart_run
M="final_eval_score final_eval_unseen_score final_sampled_eval_score final_sampled_eval_unseen_score"
M="$M final_eval_success final_eval_unseen_success start_success iterations"
# runs started before 34a1c35 (the warm start's evaluation, PPO plain seed 0) recorded no start.json: write theirs
# from the checkpoint their config names (policy.preset, policy.warmstart off), marked as written afterwards
.venv/bin/python - $WARM $OUT/*/ <<'PY'
import json, sys
from pathlib import Path
from rspo_kit.policy.models import weights_digest
from rspo_kit.policy.rollout import Policy
from rspo_kit.records import read_start, write_start

digests = {}
for run in map(Path, sys.argv[1:]):
    if not (run / "config.json").exists() or read_start(run):
        continue
    policy = json.loads((run / "config.json").read_text())["policy"]
    assert not policy["warmstart"], run
    if policy["preset"] not in digests:
        digests[policy["preset"]] = weights_digest(Policy.load(policy["preset"]).model)
    write_start(run, {"warmstart": None, "preset": policy["preset"], "weights_sha256": digests[policy["preset"]],
                      "written": "afterwards by collect.sh, from the checkpoint config.json names"})
PY
mkdir -p $R/webshop_warmstart_run
cp $WARM/final_episodes.parquet $WARM/metrics.jsonl $WARM/start.json $R/webshop_warmstart_run/
.venv/bin/python -m rspo_kit.experiments.archive $OUT $R/sweep_webshop
.venv/bin/python -m rspo_kit.experiments.report $OUT --statistics --metrics $M --reference $WARM \
  --paired SWAP=true,false --paired SWAP=true,control --paired SWAP=control,false \
  --paired SWAP=process,false --paired SWAP=mix,false --paired SWAP=true,process > $R/report.md
.venv/bin/python - <<'PY'
import glob, json, os
import pandas as pd
from rspo_kit.experiments import aggregate
from rspo_kit.experiments.report import sweep_statistics

R, OUT = "results/issue8_webshop_s28", "runs/sweeps/s28_webshop_7k"
aggregate(OUT, curve="curve_score").to_csv(f"{R}/results.csv", index=False)
sweep_statistics(OUT).to_csv(f"{R}/run_statistics.csv", index=False)
frames = [pd.read_json(f, lines=True).assign(cell=os.path.basename(os.path.dirname(f)))
          for f in sorted(glob.glob(f"{OUT}/*/metrics.jsonl"))]
pd.concat(frames).to_csv(f"{R}/metrics.csv", index=False)
# the builds of session 18's WebShop recipe (1,284 updates): their SFT losses and 60-goal evaluations
builds = {"session 18 (2 threads)": "results/issue8_webshop_s18/warm_start_sft.json",
          "s28, 1 thread (the cells' warm start)": "runs/s28/W_webshop_u1284_t1/warmstart.json",
          "s28, 1 thread, again (beside the first)": "runs/s28/W_webshop_u1284_t1_again/warmstart.json"}
runs = {k: json.load(open(v)) for k, v in builds.items() if os.path.exists(v)}
from rspo_kit.policy.models import weights_digest
from rspo_kit.policy.rollout import Policy
digest = {k: weights_digest(Policy.load(os.path.join(os.path.dirname(v), "policy")).model)[:12]
          if os.path.isdir(os.path.join(os.path.dirname(v), "policy")) else "gone" for k, v in builds.items()}
first = next(iter(runs.values()))["sft"]["losses"]
t1 = runs["s28, 1 thread (the cells' warm start)"]["sft"]["losses"]
def parted(a, b):
    d = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    return "identical" if not d else f"update {d[0]}"
with open(f"{R}/warm_starts.md", "w") as f:
    f.write("| build of one WebShop recipe | CPU | weights digest | SFT losses part from session 18's at | from the 1-thread "
            "build's at | greedy score (60 eval goals) | greedy success | sampled score (20 × 8) | pass@8 |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    for k, d in runs.items():
        g, p, losses = d["eval_greedy"], d["eval_pass8"], d["sft"]["losses"]
        cpu = d.get("machine", {}).get("cpu", "not recorded")
        f.write(f"| {k} | {cpu} | {digest[k]} | {parted(first, losses)} | {parted(t1, losses)} | {g['mean_score']:.1f} | "
                f"{100 * g['success']:.1f}% | {p['mean_score']:.1f} | {100 * p['pass_at_k']:.0f}% |\n")
PY
cp $OUT/curves.html $R/ 2>/dev/null || true
cat $R/warm_starts.md $R/report.md
