# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,local,search,report

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed
	@./scripts/install-system-deps.sh
	@$(BIN)/podium index hotpot

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

demo: setup
	$(BIN)/podium tools call python --args '{"code": "import math, platform\nprint(f\"6*7 = {6*7}\")\nprint(\"pi to 20 digits:\", format(math.pi, \".20f\"))\nprint(\"running on\", platform.node())"}'
	$(BIN)/podium tools call symbolic_math --args '{"operation": "solve", "expression": "x^2 - 5x + 6 = 0"}'

test: setup
	@./scripts/install-system-deps.sh --for-tests
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

bench: setup
	$(BIN)/python benchmarks/bench_sandbox.py
	$(BIN)/python benchmarks/bench_backends.py
	$(BIN)/python benchmarks/bench_retrieval.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
