#!/bin/bash
# issue 8, session 31: does plain PPO learn WebShop from warm start W with one setting changed? `make sweep
# SWEEP_ENV=webshop`'s settings (lr 1e-4, partial credit as the outcome, cap 15, 7,000 env steps, one thread), from
# the committed W (results/warm_starts/webshop_W), tuned on valid only: no test split is evaluated.
#   bash results/issue8_webshop_s31/probe.sh NAME [overrides...]   -> runs/s31/NAME
#   e.g. probe.sh ws_ppo_T05_s0 policy.temperature=0.5; probe.sh ws_ppo_28k_s0 train.max_env_steps=28000 train.eval_every=10
# Then every final policy greedy on all 240 valid goals: valid240.sh, compared goal by goal: valid_cmp.py.
cd "$(dirname "$0")/../.."  # the repository root
ROOT=$PWD
name=$1; shift
RSPO_KIT_CACHE=$ROOT/.cache OMP_NUM_THREADS=1 .venv/bin/python -m rspo_kit.train --preset tiny --env webshop --algo ppo --seed 0 \
  policy.preset=$ROOT/results/warm_starts/webshop_W/policy policy.warmstart=false policy.sft_minutes=2.0 \
  env.max_steps=15 reward.outcome_mode=score algo.lr=1e-4 swap.replay_filter=outcome_above_mean \
  train.iterations=1000 train.max_env_steps=7000 train.eval_every=5 train.eval_split=valid train.eval_n=40 \
  train.final_eval_split= train.threads=1 train.run_dir=$ROOT/runs/s31/$name "$@"
