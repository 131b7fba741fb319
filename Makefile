# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,local,search,report,train,tau2

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed
	@./scripts/install-system-deps.sh
	@$(BIN)/podium index hotpot

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

# The embedded SmolLM2-135M orchestrates the embedded pool offline, its actions grammar-constrained; an
# untrained 135M orchestrator rarely finishes well, which is what `podium train` is for.
demo: setup
	$(BIN)/podium run "What is 123456789 * 987654321?" --allow python --allow smollm2 --max-turns 3 --max-tokens 200 --trace demo-trace.jsonl
	$(BIN)/podium run "What is 123456789 * 987654321?" --policy dag --max-turns 1 --max-tokens 400 --trace demo-trace.jsonl

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
	$(BIN)/python benchmarks/bench_runtime.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis demo-trace.jsonl
