#!/bin/bash
# issue 8, session 31: greedy WebShop episodes on all 240 valid goals (held-out train goals) for each NAME=POLICY
# (a saved policy or a run folder: its actor) -> results/issue8_webshop_s31/valid240/NAME.csv (+ .json, the summary);
# SAMPLED=1: sampled actions instead, NAME_sampled.csv
cd "$(dirname "$0")/../.."  # the repository root
V=results/issue8_webshop_s31/valid240
mkdir -p $V
for pair in "$@"; do
  name=${pair%%=*}${SAMPLED:+_sampled}; pol=${pair#*=}
  [ -f $V/$name.csv ] && continue
  RSPO_KIT_CACHE=$PWD/.cache OMP_NUM_THREADS=1 .venv/bin/python -m rspo_kit.policy.evaluate --policy "$pol" --env webshop \
    --split valid --n 240 --max-steps 15 ${SAMPLED:+--sampled} --episodes $V/$name.tmp.csv 2>/dev/null > $V/$name.json && mv $V/$name.tmp.csv $V/$name.csv
  echo "$(date) $name"
done
