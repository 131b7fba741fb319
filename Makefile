# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,local,search,report,train,replay,mcp,ray,tau2,docs

.PHONY: setup demo demo-untrained test test-extras lint docs bench clean claim claim-eval claim-sweep claim-price-point claim-mmlu claim-mmlu-eval claim-unseen claim-unseen-eval claim-priced-data claim-priced-teacher

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

# One pytest-xdist worker per core (at most 4: each loads its own models); tests marked xdist_group share a worker.
TEST_WORKERS ?= auto
test: setup
	@./scripts/install-system-deps.sh --for-tests
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses 4 --dist loadgroup

# Tests of extras too heavy for every machine: llama.cpp's server is compiled from source (minutes).
test-extras: setup
	$(BIN)/pip install -q -e '.[$(EXTRAS),llamacpp]'
	$(BIN)/python -m pytest -q tests/test_llamacpp.py

lint: setup
	$(BIN)/ruff check src tests benchmarks examples support
	$(BIN)/ruff format --check src tests benchmarks examples support

# The documentation site (docs/, mkdocs.yml) into site/: strict, so a broken link, a missing page or any warning
# fails the build (the test suite builds it the same way). The Reference pages are generated from the code.
docs: $(VENV)/.installed
	$(BIN)/mkdocs build --strict

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
	$(BIN)/python benchmarks/bench_train.py

# The core claim: train the 135M orchestrator on replayed GSM8K outcomes of Mixtral and GPT-4 through Podium's own
# path (routing tasks → data collect → train sft → train grpo → eval → routing compare), then evaluate it against
# learned routers on the test split and under unseen prices. CLAIM_LIMIT bounds the test questions (default: all
# 270); CLAIM_PRICES=FILE evaluates under another price sheet. Runs resume; outputs go to runs/claim.
CLAIM := experiments/claim
CLAIM_RUNS ?= runs/claim
CLAIM_LIMIT ?=
CLAIM_PRICES ?=
# The learned routers are fitted on the whole train split unless CLAIM_TRAIN=N (its first N questions).
CLAIM_TRAIN ?=
# The unseen-price sweep of `make claim` (`make claim-sweep`): sheets of experiments/claim/prices, the test questions
# of each point (the GRPO adapter takes about 1.5 s per question here), and where each point's comparison goes.
CLAIM_SWEEP ?= sweep-gpt4-x0.35 sweep-gpt4-x0.7 sweep-gpt4-x1.4 sweep-gpt4-x2.8
CLAIM_SWEEP_LIMIT ?= 100
CLAIM_SWEEP_OUT ?= $(CLAIM)/results
CLAIM_TAG := $(if $(CLAIM_PRICES),-$(basename $(notdir $(CLAIM_PRICES))))$(if $(CLAIM_LIMIT),-first$(CLAIM_LIMIT))
CLAIM_IMPORT = $(BIN)/podium routing import routellm-gsm8k --out $(CLAIM_RUNS)/recording
CLAIM_EVAL = $(BIN)/podium eval --tasks $(CLAIM_RUNS)/test.jsonl --concurrency 2 \
	$(if $(CLAIM_LIMIT),--limit $(CLAIM_LIMIT)) $(if $(CLAIM_PRICES),--prices $(CLAIM_PRICES))
# The GRPO adapter on the validation split at the list price (CLAIM_VALID_LIMIT: its first N questions; default all
# 139), which calibrates its escalation probability for its priced row; claim-eval and the sweep read the same run.
CLAIM_VALID_LIMIT ?=
CLAIM_VALID_RUN = $(CLAIM_RUNS)/valid-grpo$(if $(CLAIM_VALID_LIMIT),-first$(CLAIM_VALID_LIMIT))
CLAIM_VALID_TASKS = $(CLAIM_IMPORT) && $(BIN)/podium routing tasks --recording $(CLAIM_RUNS)/recording --split validation \
	--out $(CLAIM_RUNS)/validation.jsonl
CLAIM_VALID_EVAL = $(BIN)/podium eval --tasks $(CLAIM_RUNS)/validation.jsonl --concurrency 2 \
	$(if $(CLAIM_VALID_LIMIT),--limit $(CLAIM_VALID_LIMIT))
CLAIM_CALIBRATE = $(CLAIM_VALID_TASKS) && $(CLAIM_VALID_EVAL) --system $(CLAIM)/system-grpo.yaml --out $(CLAIM_VALID_RUN)
CLAIM_VALID_COMPARE = $(BIN)/podium routing compare --recording $(CLAIM_RUNS)/recording --split validation --json \
	$(if $(CLAIM_VALID_LIMIT),--limit $(CLAIM_VALID_LIMIT)) $(if $(CLAIM_TRAIN),--train-limit $(CLAIM_TRAIN)) \
	$(if $(CLAIM_OUT),--out $(CLAIM_OUT)/validation) --orchestrator orchestrator_grpo=$(CLAIM_VALID_RUN)
# The test split's tasks; the GRPO adapter's evaluation (claim-eval and each sweep point) and the comparison with
# the routers, to which claim-eval adds the SFT adapter. The comparison also places the probability routers and the
# calibrated GRPO adapter where the price sheet's break-even probability under grpo.yaml's reward puts them (_priced).
CLAIM_TEST_TASKS = $(CLAIM_IMPORT) && $(BIN)/podium routing tasks --recording $(CLAIM_RUNS)/recording --split test \
	--out $(CLAIM_RUNS)/test.jsonl
CLAIM_EVAL_GRPO = $(CLAIM_EVAL) --system $(CLAIM)/system-grpo.yaml --out $(CLAIM_RUNS)/eval-grpo$(CLAIM_TAG)
CLAIM_ROUTERS = $(BIN)/podium routing compare --recording $(CLAIM_RUNS)/recording --split test --json $(if $(CLAIM_LIMIT),--limit $(CLAIM_LIMIT)) \
	$(if $(CLAIM_TRAIN),--train-limit $(CLAIM_TRAIN)) \
	$(if $(CLAIM_PRICES),--prices $(CLAIM_PRICES)) $(if $(CLAIM_OUT),--out $(CLAIM_OUT)) \
	--orchestrator orchestrator_grpo=$(CLAIM_RUNS)/eval-grpo$(CLAIM_TAG)
CLAIM_COMPARE = $(CLAIM_ROUTERS) --reward-from $(CLAIM)/grpo.yaml --calibration orchestrator_grpo=$(CLAIM_VALID_RUN)
claim: $(VENV)/.installed
	$(CLAIM_IMPORT)
	$(BIN)/podium routing tasks --recording $(CLAIM_RUNS)/recording --split train --out $(CLAIM_RUNS)/train.jsonl
	$(BIN)/podium data collect --config $(CLAIM)/collect.yaml --teacher $(CLAIM)/teacher.yaml --quiet
	$(BIN)/podium train sft --config $(CLAIM)/sft.yaml
	$(BIN)/podium train grpo --config $(CLAIM)/grpo.yaml
	$(MAKE) claim-eval CLAIM_OUT=$(CLAIM)/results
	$(MAKE) claim-sweep

# The committed adapters and every router on the test split; the last line printed is one JSON object.
claim-eval: $(VENV)/.installed
	$(CLAIM_TEST_TASKS)
	@# The two adapters and the calibration side by side, each decoding on one CPU thread; the GRPO run on the
	@# test split shows the progress.
	$(CLAIM_EVAL) --quiet --system $(CLAIM)/system-sft.yaml --out $(CLAIM_RUNS)/eval-sft$(CLAIM_TAG) & sft=$$!; \
	  { $(CLAIM_CALIBRATE) --quiet; } & valid=$$!; \
	  $(CLAIM_EVAL_GRPO); grpo=$$?; \
	  wait $$sft && wait $$valid && test $$grpo -eq 0
	@# The same comparison on the validation split, where every choice of the recipe was made (the GRPO adapter's
	@# calibration run): its JSON line goes beside that run, as valid-grpo.json (and into CLAIM_OUT/validation).
	$(CLAIM_VALID_COMPARE) > $(CLAIM_VALID_RUN).json
	$(CLAIM_COMPARE) --orchestrator orchestrator_sft=$(CLAIM_RUNS)/eval-sft$(CLAIM_TAG)

# $(call SHEETS_IN_PAIRS,VARIABLE,COMMAND): COMMAND once for each price sheet VARIABLE names, two side by side (each
# evaluation decodes on one CPU thread); in COMMAND, $$sheet is the sheet's name and $$quiet is --quiet for the second
# of a pair (the first shows its progress). An empty VARIABLE stops make before any recipe line runs.
SHEETS_IN_PAIRS = $(if $(strip $($(1))),,$(error $(1) names no price sheet: give names of \
	experiments/claim/prices/*.yaml)) set -- $($(1)); while [ -n "$$1" ]; do \
	  sheet=$$1 quiet=; $(2) & first=$$!; second=0; \
	  if [ -n "$$2" ]; then sheet=$$2 quiet=--quiet; $(2) || second=1; shift; fi; \
	  wait $$first && test $$second -eq 0 || exit 1; shift; done

# The unseen-price sweep: the GRPO adapter and the routers under each sheet of CLAIM_SWEEP, two sheets side by side.
# Each point prints its JSON line.
CLAIM_POINT = $(MAKE) --no-print-directory claim-price-point CLAIM_LIMIT=$(CLAIM_SWEEP_LIMIT)
claim-sweep: $(VENV)/.installed
	$(CLAIM_TEST_TASKS)
	$(CLAIM_CALIBRATE)
	$(call SHEETS_IN_PAIRS,CLAIM_SWEEP,$(CLAIM_POINT) CLAIM_PRICES=$(CLAIM)/prices/$$sheet.yaml \
	  CLAIM_OUT=$(CLAIM_SWEEP_OUT)/$$sheet CLAIM_QUIET=$$quiet)

# One point of the sweep: the GRPO adapter under CLAIM_PRICES on the first CLAIM_SWEEP_LIMIT test questions, greedy
# and deciding at the escalation threshold of the sheet (`podium routing threshold`, which also writes the break-even
# it computed beside the run), in the comparison as orchestrator_grpo_threshold: the run its _priced row predicts.
CLAIM_THRESHOLD_RUN = $(CLAIM_RUNS)/eval-grpo-threshold$(CLAIM_TAG)
claim-price-point:
	$(CLAIM_EVAL_GRPO) $(CLAIM_QUIET)
	$(BIN)/podium routing threshold --recording $(CLAIM_RUNS)/recording --reward-from $(CLAIM)/grpo.yaml --calibration $(CLAIM_VALID_RUN) \
	  $(if $(CLAIM_PRICES),--prices $(CLAIM_PRICES)) $(if $(CLAIM_TRAIN),--train-limit $(CLAIM_TRAIN)) \
	  --system $(CLAIM)/system-grpo.yaml \
	  --out $(CLAIM_THRESHOLD_RUN).yaml > $(CLAIM_THRESHOLD_RUN).json
	$(CLAIM_EVAL) --system $(CLAIM_THRESHOLD_RUN).yaml --out $(CLAIM_THRESHOLD_RUN) $(CLAIM_QUIET)
	$(CLAIM_COMPARE) --orchestrator orchestrator_grpo_threshold=$(CLAIM_THRESHOLD_RUN)

# Distilling the priced decision into the model (experiments/claim/README.md, "Unseen prices"; an ablation that
# worked below the list price only): the teacher, CLAIM_PRICED_SYSTEM (the GRPO adapter with GPT-4's price beside each decision), decides at
# each training sheet's threshold, calibrated on its own run over the validation questions under that sheet, and plays
# the first CLAIM_PRICED_TRAIN train questions under it, two sheets side by side; its correct runs become SFT data in
# $(CLAIM_PRICED_RUNS)/collect-SHEET, which `podium train sft --config experiments/claim/sft-priced.yaml` reads.
CLAIM_PRICED_SHEETS ?= train-gpt4-x0.25 train-gpt4-x0.5 train-list train-gpt4-x2 train-gpt4-x4
CLAIM_PRICED_TRAIN ?= 200
CLAIM_PRICED_RUNS ?= $(CLAIM_RUNS)/priced
CLAIM_PRICED_SYSTEM ?= $(CLAIM)/system-teacher-priced.yaml
CLAIM_PRICED_TEACHER = $(MAKE) --no-print-directory claim-priced-teacher
claim-priced-data: $(VENV)/.installed
	$(CLAIM_IMPORT)
	$(BIN)/podium routing tasks --recording $(CLAIM_RUNS)/recording --split train --out $(CLAIM_RUNS)/train.jsonl
	$(CLAIM_VALID_TASKS)
	mkdir -p $(CLAIM_PRICED_RUNS)
	$(call SHEETS_IN_PAIRS,CLAIM_PRICED_SHEETS,$(CLAIM_PRICED_TEACHER) CLAIM_PRICED_SHEET=$$sheet)

# One training sheet's teacher: the teacher system's calibration run on the validation questions under the sheet
# (the prompt it will decide on), its threshold system, its run on the train questions, the run's correct trajectories.
CLAIM_PRICED_TEACHER_RUN = $(CLAIM_PRICED_RUNS)/teacher-$(CLAIM_PRICED_SHEET)
CLAIM_PRICED_VALID_RUN = $(CLAIM_PRICED_RUNS)/valid-$(CLAIM_PRICED_SHEET)
claim-priced-teacher:
	$(if $(CLAIM_PRICED_SHEET),,$(error CLAIM_PRICED_SHEET names no price sheet: give one name of \
	  experiments/claim/prices/*.yaml))
	$(CLAIM_VALID_EVAL) --quiet --prices $(CLAIM)/prices/$(CLAIM_PRICED_SHEET).yaml --system $(CLAIM_PRICED_SYSTEM) \
	  --out $(CLAIM_PRICED_VALID_RUN)
	$(BIN)/podium routing threshold --recording $(CLAIM_RUNS)/recording --reward-from $(CLAIM)/grpo.yaml --calibration $(CLAIM_PRICED_VALID_RUN) \
	  --prices $(CLAIM)/prices/$(CLAIM_PRICED_SHEET).yaml --system $(CLAIM_PRICED_SYSTEM) \
	  --out $(CLAIM_PRICED_TEACHER_RUN).yaml > $(CLAIM_PRICED_TEACHER_RUN).json
	$(BIN)/podium eval --tasks $(CLAIM_RUNS)/train.jsonl --limit $(CLAIM_PRICED_TRAIN) --concurrency 2 --quiet \
	  --prices $(CLAIM)/prices/$(CLAIM_PRICED_SHEET).yaml --system $(CLAIM_PRICED_TEACHER_RUN).yaml \
	  --out $(CLAIM_PRICED_TEACHER_RUN)
	$(BIN)/podium data collect --from-eval $(CLAIM_PRICED_TEACHER_RUN) --max-tool-share 1.0 --quiet \
	  --out $(CLAIM_PRICED_RUNS)/collect-$(CLAIM_PRICED_SHEET)

# Unseen pool members: the GRPO adapter over each pool of CLAIM_UNSEEN (system-grpo-NAME.yaml): pool-unseen.yaml
# (the claim's pool and SmolLM2-135M-Instruct, free, recorded once on the first 100 test questions: the recording is
# committed), pool-batch.yaml (GPT-4's replies under another name at
# half its price) and pool-batch-dear.yaml (the same at twice its price), beside the same adapter over the claim's
# pool, on the first CLAIM_UNSEEN_LIMIT (at most 100 with unseen, whose recording has no more) test questions, side
# by side; the comparison's last line is one JSON object.
CLAIM_UNSEEN ?= unseen batch batch-dear
CLAIM_UNSEEN_GIVEN = $(if $(strip $(CLAIM_UNSEEN)),,$(error CLAIM_UNSEEN names no pool: give NAMEs of \
	experiments/claim/system-grpo-NAME.yaml))
CLAIM_UNSEEN_LIMIT ?= 100
CLAIM_RECORDED := 100
CLAIM_SMOLLM2 = $(filter unseen,$(CLAIM_UNSEEN))
claim-unseen: $(VENV)/.installed
	$(CLAIM_UNSEEN_GIVEN)
	$(if $(CLAIM_SMOLLM2),$(if $(shell [ $(CLAIM_UNSEEN_LIMIT) -le $(CLAIM_RECORDED) ] || echo over),$(error \
	  CLAIM_UNSEEN_LIMIT=$(CLAIM_UNSEEN_LIMIT): the unseen member is recorded on the first $(CLAIM_RECORDED) test \
	  questions only; leave unseen out of CLAIM_UNSEEN for more)))
	$(CLAIM_TEST_TASKS)
	$(MAKE) --no-print-directory claim-unseen-eval CLAIM_LIMIT=$(CLAIM_UNSEEN_LIMIT)

# The pools of CLAIM_UNSEEN_PRICED (their workers recorded on the train split: the GPT-4 strangers) also run deciding
# at each worker's break-even under grpo.yaml's reward: `podium routing threshold --system` gives one threshold per
# worker to escalate to, each priced at its own price, on the model's escalation probability calibrated by the
# adapter's run over the validation questions with that pool; in the comparison as orchestrator_grpo_NAME_threshold.
CLAIM_UNSEEN_PRICED ?= $(filter batch batch-dear,$(CLAIM_UNSEEN))
CLAIM_UNSEEN_VALID = $(CLAIM_RUNS)/valid-grpo-$$name$(if $(CLAIM_VALID_LIMIT),-first$(CLAIM_VALID_LIMIT))
CLAIM_UNSEEN_THRESHOLD = $(CLAIM_RUNS)/eval-grpo-$$name-threshold$(CLAIM_TAG)
claim-unseen-eval:
	$(CLAIM_UNSEEN_GIVEN)
	pids=; for name in $(CLAIM_UNSEEN); do \
	  $(CLAIM_EVAL) --quiet --system $(CLAIM)/system-grpo-$$name.yaml --out $(CLAIM_RUNS)/eval-grpo-$$name$(CLAIM_TAG) & \
	  pids="$$pids $$!"; done; \
	  $(CLAIM_EVAL_GRPO); grpo=$$?; failed=0; for pid in $$pids; do wait $$pid || failed=1; done; \
	  test $$grpo -eq 0 && test $$failed -eq 0
	$(if $(strip $(CLAIM_UNSEEN_PRICED)),$(CLAIM_VALID_TASKS))
	@# the first pool's runs show the progress
	pids=; quiet=; for name in $(CLAIM_UNSEEN_PRICED); do { \
	  $(CLAIM_VALID_EVAL) $$quiet --system $(CLAIM)/system-grpo-$$name.yaml --out $(CLAIM_UNSEEN_VALID) && \
	  $(BIN)/podium routing threshold --recording $(CLAIM_RUNS)/recording --reward-from $(CLAIM)/grpo.yaml --calibration $(CLAIM_UNSEEN_VALID) \
	    $(if $(CLAIM_PRICES),--prices $(CLAIM_PRICES)) $(if $(CLAIM_TRAIN),--train-limit $(CLAIM_TRAIN)) \
	    --system $(CLAIM)/system-grpo-$$name.yaml --out $(CLAIM_UNSEEN_THRESHOLD).yaml > $(CLAIM_UNSEEN_THRESHOLD).json && \
	  $(CLAIM_EVAL) $$quiet --system $(CLAIM_UNSEEN_THRESHOLD).yaml --out $(CLAIM_UNSEEN_THRESHOLD); } & \
	  pids="$$pids $$!"; quiet=--quiet; done; failed=0; for pid in $$pids; do wait $$pid || failed=1; done; test $$failed -eq 0
	$(CLAIM_ROUTERS) $(foreach name,$(CLAIM_UNSEEN),\
	  --orchestrator orchestrator_grpo_$(subst -,_,$(name))=$(CLAIM_RUNS)/eval-grpo-$(name)$(CLAIM_TAG)) \
	  $(foreach name,$(CLAIM_UNSEEN_PRICED),--orchestrator \
	  orchestrator_grpo_$(subst -,_,$(name))_threshold=$(CLAIM_RUNS)/eval-grpo-$(name)-threshold$(CLAIM_TAG))

# The MMLU variant: RouteLLM's MMLU recording keeps only whether each model was right, so the orchestrator reads no
# reply and routes from the question alone. CLAIM_MMLU_TRAIN train questions → data collect → train sft → eval on
# the test subjects (unseen in training) → routing compare with the question-only routers, fitted on the same train
# questions. CLAIM_LIMIT bounds the test questions (default: all 1,521). Outputs go to runs/claim-mmlu.
CLAIM_MMLU := $(CLAIM)/mmlu
CLAIM_MMLU_RUNS ?= runs/claim-mmlu
# Train questions (the first N of the train subjects): the orchestrator's oracle trajectories and the routers' fit.
CLAIM_MMLU_TRAIN ?= 1000
CLAIM_MMLU_IMPORT = $(BIN)/podium routing import routellm-mmlu --out $(CLAIM_MMLU_RUNS)/recording
claim-mmlu: $(VENV)/.installed
	$(CLAIM_MMLU_IMPORT)
	$(BIN)/podium routing tasks --recording $(CLAIM_MMLU_RUNS)/recording --split train --limit $(CLAIM_MMLU_TRAIN) \
	  --out $(CLAIM_MMLU_RUNS)/train.jsonl
	$(BIN)/podium data collect --config $(CLAIM_MMLU)/collect.yaml --teacher $(CLAIM_MMLU)/teacher.yaml --quiet
	$(BIN)/podium train sft --config $(CLAIM_MMLU)/sft.yaml
	$(MAKE) claim-mmlu-eval CLAIM_OUT=$(CLAIM)/results/mmlu

# The committed MMLU adapter and the question-only routers on the unseen test subjects; last line: one JSON object.
claim-mmlu-eval: $(VENV)/.installed
	$(CLAIM_MMLU_IMPORT)
	$(BIN)/podium routing tasks --recording $(CLAIM_MMLU_RUNS)/recording --split test --out $(CLAIM_MMLU_RUNS)/test.jsonl
	$(BIN)/podium eval --tasks $(CLAIM_MMLU_RUNS)/test.jsonl --concurrency 2 $(if $(CLAIM_LIMIT),--limit $(CLAIM_LIMIT)) \
	  --system $(CLAIM_MMLU)/system.yaml --out $(CLAIM_MMLU_RUNS)/eval$(CLAIM_TAG)
	$(BIN)/podium routing compare --recording $(CLAIM_MMLU_RUNS)/recording --split test --train-limit $(CLAIM_MMLU_TRAIN) --json \
	  $(if $(CLAIM_LIMIT),--limit $(CLAIM_LIMIT)) $(if $(CLAIM_OUT),--out $(CLAIM_OUT)) \
	  --orchestrator orchestrator_mmlu=$(CLAIM_MMLU_RUNS)/eval$(CLAIM_TAG)

# The flywheel (experiments/flywheel/README.md, docs/guides/flywheel.md): one round of serve → grade → data → train →
# gate → shadow → promote on the claim's recording. The claim's SFT system serves GSM8K train questions (key app) and
# validation questions (key validation), sent through the OpenAI client with their golds and graded on serve; `podium
# data collect --from-served` makes GRPO tasks of the train traffic and holds the validation traffic back; GRPO
# continues the SFT adapter on those tasks; `podium eval --against` gates the candidate on the held-back traffic; the
# candidate runs in shadow beside the live system on FLYWHEEL_SHADOW validation questions and `podium promote` swaps
# it in if it passed; `podium routing compare` prints the test split's APGR and USD per question before and after.
# Each step's output stays in FLYWHEEL_RUNS, so a rerun resumes at the first step not done. FLYWHEEL_TRAIN (400 of the
# 910), FLYWHEEL_VALID (all 139) and FLYWHEEL_LIMIT (the first 100 of the 270) bound the train, validation and test
# questions, FLYWHEEL_STEPS (4) the GRPO steps, FLYWHEEL_ROUTERS_TRAIN the train questions the comparison's router is fitted on (default: all).
.PHONY: flywheel
FLYWHEEL := experiments/flywheel
FLYWHEEL_RUNS ?= runs/flywheel
FLYWHEEL_TRAIN ?= 400
FLYWHEEL_VALID ?=
FLYWHEEL_LIMIT ?= 100
FLYWHEEL_SHADOW ?= 10
FLYWHEEL_STEPS ?= 4
FLYWHEEL_GRPO ?= $(FLYWHEEL)/grpo.yaml
FLYWHEEL_ROUTERS_TRAIN ?=
FLYWHEEL_PORT ?= 8052
FW := $(FLYWHEEL_RUNS)
FLYWHEEL_URL = http://127.0.0.1:$(FLYWHEEL_PORT)/v1
FLYWHEEL_SERVE = $(BIN)/podium serve --system $(CLAIM)/system-sft.yaml --config $(FLYWHEEL)/serve.yaml \
	--port $(FLYWHEEL_PORT)
FLYWHEEL_SEND = $(BIN)/python $(FLYWHEEL)/traffic.py --url $(FLYWHEEL_URL) --model orchestrator_sft
FLYWHEEL_CANDIDATE = $(FW)/system-candidate.yaml
FLYWHEEL_EVAL = $(BIN)/podium eval --tasks $(FW)/test.jsonl --concurrency 2 $(if $(FLYWHEEL_LIMIT),--limit $(FLYWHEEL_LIMIT))
# $(call FLYWHEEL_SERVING,SERVER,CLIENT): CLIENT runs while SERVER serves (in the background, stopped after).
FLYWHEEL_SERVING = $(1) & server=$$!; { $(2); }; sent=$$?; kill -INT $$server; wait $$server; test $$sent -eq 0
export FLYWHEEL_APP_KEY ?= flywheel-app
export FLYWHEEL_VALIDATION_KEY ?= flywheel-validation
export FLYWHEEL_OPERATOR_KEY ?= flywheel-operator

flywheel: $(VENV)/.installed
	@$(MAKE) --no-print-directory $(FW)/compare/results.json

$(FW)/tasks.done:
	$(BIN)/podium routing import routellm-gsm8k --out $(FW)/recording
	for split in train validation test; do $(BIN)/podium routing tasks --recording $(FW)/recording --split $$split \
	  --out $(FW)/$$split.jsonl || exit 1; done
	touch $@

# 1. Traffic: the SFT system answers the train and validation questions, each graded against its gold as it ends.
$(FW)/served/traffic.done: $(FW)/tasks.done
	$(call FLYWHEEL_SERVING,$(FLYWHEEL_SERVE) --served $(FW)/served,\
	  $(FLYWHEEL_SEND) --tasks $(FW)/train.jsonl --key-env FLYWHEEL_APP_KEY $(if $(FLYWHEEL_TRAIN),--limit $(FLYWHEEL_TRAIN)) && \
	  $(FLYWHEEL_SEND) --tasks $(FW)/validation.jsonl --key-env FLYWHEEL_VALIDATION_KEY $(if $(FLYWHEEL_VALID),--limit $(FLYWHEEL_VALID)))
	touch $@

# 2. Data: GRPO tasks from the train traffic; the validation traffic held back (tasks, and the served version's run).
$(FW)/collect/funnel.json: $(FW)/served/traffic.done
	$(BIN)/podium data collect --config $(FLYWHEEL)/collect.yaml --from-served $(FW)/served --out $(FW)/collect --quiet

# 3. Training: GRPO continues the served SFT adapter on the served tasks.
$(FW)/adapter/adapter_model.safetensors: $(FW)/collect/funnel.json
	$(BIN)/podium train grpo --config $(FLYWHEEL_GRPO) --tasks $(FW)/collect/tasks.jsonl --output-dir $(FW)/adapter \
	  --max-steps $(FLYWHEEL_STEPS)

# 4. The gate: the candidate on the held-back tasks against the serving version's graded traffic on them.
$(FW)/gate/comparison.json: $(FW)/adapter/adapter_model.safetensors
	sed 's|runs/flywheel|$(FW)|' $(FLYWHEEL)/system-candidate.yaml > $(FLYWHEEL_CANDIDATE)
	set -- $(FW)/collect/heldout-*/; test $$# -eq 1 || { echo "expected one served version held back: $$*"; exit 1; }; \
	  $(BIN)/podium eval --tasks $(FW)/collect/heldout.jsonl --system $(FLYWHEEL_CANDIDATE) --out $(FW)/gate \
	  --concurrency 2 --quiet --against $$1 --gate-metric reward --gate-usd-scale 0.015 --gate-margin 0.02

# 5. Shadow and promotion: the candidate beside the live system on validation traffic, promoted if it passed.
$(FW)/promoted.done: $(FW)/gate/comparison.json
	$(call FLYWHEEL_SERVING,$(FLYWHEEL_SERVE) --served $(FW)/served-shadow --shadow $(FLYWHEEL_CANDIDATE),\
	  $(FLYWHEEL_SEND) --tasks $(FW)/validation.jsonl --key-env FLYWHEEL_VALIDATION_KEY --limit $(FLYWHEEL_SHADOW) && \
	  { $(BIN)/podium promote --model orchestrator_sft --gate $(FW)/gate/comparison.json --url $(FLYWHEEL_URL) \
	    --api-key-env FLYWHEEL_OPERATOR_KEY || echo "the candidate stays in shadow"; } && \
	  $(FLYWHEEL_SEND) --tasks $(FW)/validation.jsonl --key-env FLYWHEEL_VALIDATION_KEY --limit 1)
	touch $@

# 6. The test split before and after the round: the paired intervals of accuracy, USD and reward (after against
# before, in test-after/comparison.json), then the two systems beside the routers; the last line is one JSON object.
$(FW)/compare/results.json: $(FW)/promoted.done
	$(FLYWHEEL_EVAL) --quiet --system $(CLAIM)/system-sft.yaml --out $(FW)/test-before
	$(FLYWHEEL_EVAL) --system $(FLYWHEEL_CANDIDATE) --out $(FW)/test-after --against $(FW)/test-before \
	  --gate-metric reward --gate-usd-scale 0.015
	$(BIN)/podium routing compare --recording $(FW)/recording --split test --routers cascade_checks \
	  $(if $(FLYWHEEL_LIMIT),--limit $(FLYWHEEL_LIMIT)) $(if $(FLYWHEEL_ROUTERS_TRAIN),--train-limit $(FLYWHEEL_ROUTERS_TRAIN)) \
	  --orchestrator before=$(FW)/test-before --orchestrator after=$(FW)/test-after --out $(FW)/compare

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis demo-trace.jsonl site
