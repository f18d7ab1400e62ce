# queueref: every check runs from here. The venv installs itself when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Deterministic Hypothesis runs under CI, larger ones locally.
HYPOTHESIS_PROFILE ?= $(if $(CI),ci,dev)
export HYPOTHESIS_PROFILE
PYTEST_WORKERS ?= 2

.PHONY: setup test lint types crosshair-queues generate proofs bound-table trace vectors bench mutation verify clean

$(STAMP): pyproject.toml
	mkdir -p build
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,serve,plot]'
	touch $(STAMP)

setup: $(STAMP)

# Two runs: the in-process tests on every core, then the tests that start real
# processes and servers one at a time, so they never compete for the cores (or ports).
test: setup
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not multiprocess and not e2e"
	$(BIN)/python -m pytest -q -m "multiprocess or e2e" tests

lint: setup
	$(BIN)/ruff check reference tests proofs tools
	$(BIN)/ruff format --check reference tests proofs tools

# The package, its tests and tools, and the generator of the proofs with what it writes.
types: setup
	$(BIN)/mypy reference/queueref tests tools proofs/mutations.py proofs/generate.py \
		proofs/queue_obligations.py proofs/mutants

# Fails on any counterexample; prints each condition's status (confirmed or not).
crosshair-queues: setup
	mkdir -p build
	$(BIN)/crosshair check --analysis_kind=icontract --report_all --per_condition_timeout=3 \
		reference/queueref/queue_semantics.py | tee build/crosshair-queues.txt
	! grep -q ": error:" build/crosshair-queues.txt

vectors: setup
	$(BIN)/queueref vectors --out build/vectors

# Rewrites every generated file: obligations, mutants, manifests, broken copies.
generate: setup
	$(BIN)/python proofs/generate.py

# Fails when a generated file is stale, then runs every obligation and mutant.
proofs: setup
	$(BIN)/python proofs/generate.py --check
	$(BIN)/python tools/run_proofs.py

# Mutation testing of the reference (not part of verify: slow). SAMPLE=60 runs a seeded
# sample of 60 mutants per module; MODULES=queues,waiting restricts the modules.
SAMPLE ?=
MODULES ?=
mutation: setup
	$(BIN)/python -m pip install -q -e '.[mutation]'
	nice -n 10 $(BIN)/python tools/mutation.py $(if $(SAMPLE),--sample $(SAMPLE)) \
		$(if $(MODULES),--modules $(MODULES))

bound-table: setup
	$(BIN)/python tools/bound_table.py

trace: setup
	$(BIN)/python tools/trace.py

bench: setup
	$(BIN)/python tools/bench.py

verify: setup
	$(BIN)/python tools/verify.py

clean:
	rm -rf build .venv .mypy_cache .ruff_cache .hypothesis
