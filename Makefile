# Two commands for a newcomer: `make demo` and `make test`. Both create .venv if it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lab bench checkpoint notebooks clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)  ## train TinyGPT briefly, run every eval, write reports/report.json and .png
	$(BIN)/python evalcore.py

test: $(STAMP)  ## unit tests, then every notebook under nbval
	$(BIN)/python -m pytest

lab: $(STAMP)  ## open the lessons in JupyterLab
	$(BIN)/jupyter lab notebooks/

bench: $(STAMP)  ## performance figures, as ratios against baselines measured in the same run
	$(BIN)/python benchmarks/bench_evalcore.py

checkpoint: $(STAMP)  ## retrain every shipped checkpoint from the seed (about 6 min); re-record lesson 06's completions
	$(BIN)/python evalcore.py checkpoint
	$(BIN)/python evalcore.py record

notebooks: $(STAMP)  ## re-execute every lesson top to bottom in a fresh kernel, in place
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --NotebookClient.record_timing=False notebooks/[0-9][0-9]_*.ipynb

clean:
	rm -rf $(VENV) reports .pytest_cache
