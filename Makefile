# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,local,search,report,train,replay,mcp,ray,tau2

.PHONY: setup demo demo-untrained test test-extras lint bench clean claim claim-eval

setup: $(VENV)/.installed
	@./scripts/install-system-deps.sh
	@$(BIN)/podium index hotpot

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

# The embedded SmolLM2-135M with the demo's LoRA adapter (examples/demo/adapter, made by `podium train sft --config
# examples/demo/train_sft.yaml`) orchestrates the demo pool offline under each policy; actions are decoded under
# grammars sized to the turn budget, so every call closes and runs. `make demo-untrained` runs the bare model.
# Answers and traces go to demo-trace.jsonl.
DEMO_QUESTION ?= What is 123456789 * 987654321?
DEMO_POOL ?= examples/demo/pool-trained.yaml
demo: setup
	$(BIN)/podium run "$(DEMO_QUESTION)" --pool $(DEMO_POOL) --config examples/demo/serial.yaml --trace demo-trace.jsonl
	$(BIN)/podium run "$(DEMO_QUESTION)" --pool $(DEMO_POOL) --config examples/demo/parallel.yaml --trace demo-trace.jsonl
	$(BIN)/podium run "$(DEMO_QUESTION)" --pool $(DEMO_POOL) --config examples/demo/dag.yaml --trace demo-trace.jsonl

demo-untrained:
	$(MAKE) demo DEMO_POOL=examples/demo/pool.yaml

test: setup
	@./scripts/install-system-deps.sh --for-tests
	$(BIN)/python -m pytest -q

# Tests of extras too heavy for every machine: llama.cpp's server is compiled from source (minutes).
test-extras: setup
	$(BIN)/pip install -q -e '.[$(EXTRAS),llamacpp]'
	$(BIN)/python -m pytest -q tests/test_llamacpp.py

lint: setup
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

bench: setup
	$(BIN)/python benchmarks/bench_sandbox.py
	$(BIN)/python benchmarks/bench_backends.py
	$(BIN)/python benchmarks/bench_retrieval.py
	$(BIN)/python benchmarks/bench_runtime.py
	$(BIN)/python benchmarks/bench_cli.py --collect
	$(BIN)/python benchmarks/bench_parsing.py
	$(BIN)/python benchmarks/bench_faults.py
	$(BIN)/python benchmarks/bench_serve.py
	$(BIN)/python benchmarks/bench_ray.py
	$(BIN)/python benchmarks/bench_tau2_crosscheck.py

# The core claim (issue 18): train the 135M orchestrator on replayed GSM8K outcomes of Mixtral and GPT-4, then
# evaluate it against learned routers on the test split. CLAIM_LIMIT bounds the test questions the orchestrators
# play (each is a CPU episode); routers are scored on the same questions.
CLAIM_DIR ?= experiments/claim
CLAIM_LIMIT ?= 60
claim: setup
	$(BIN)/python $(CLAIM_DIR)/train.py --out $(CLAIM_DIR)/adapter
	$(BIN)/python $(CLAIM_DIR)/curves.py $(CLAIM_DIR)/adapter/curves.jsonl --out $(CLAIM_DIR)/adapter/curves.svg
	$(BIN)/python $(CLAIM_DIR)/evaluate.py --adapters $(CLAIM_DIR)/adapter --stages base,sft,grpo --limit $(CLAIM_LIMIT) --out $(CLAIM_DIR)/results
	$(BIN)/python $(CLAIM_DIR)/evaluate.py --adapters $(CLAIM_DIR)/adapter --stages grpo --limit $(CLAIM_LIMIT) --prices $(CLAIM_DIR)/prices-strong-4x-cheaper.yaml --out $(CLAIM_DIR)/results/unseen-prices

# Only the committed adapters and the routers; the last line printed is one JSON object.
claim-eval: setup
	$(BIN)/python $(CLAIM_DIR)/evaluate.py --adapters $(CLAIM_DIR)/adapter --stages sft,grpo --limit $(CLAIM_LIMIT)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis demo-trace.jsonl
