# queueref: every check runs from here. The venv installs itself when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Deterministic Hypothesis runs under CI, larger ones locally.
HYPOTHESIS_PROFILE ?= $(if $(CI),ci,dev)
export HYPOTHESIS_PROFILE
PYTEST_WORKERS ?= 2

.PHONY: setup test soak lint types crosshair-queues proofs bound-table trace vectors bench verify clean

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
	$(BIN)/python -m pytest -q -m "(multiprocess or e2e) and not slow" tests

# The soak run of serve (E2E-SOAK-1): about 90 s, 2,000 connections; not part of `make test`.
soak: setup
	$(BIN)/python -m pytest -q -m slow tests/test_soak.py

lint: setup
	$(BIN)/ruff check reference tests proofs tools
	$(BIN)/ruff format --check reference tests proofs tools

types: setup
	$(BIN)/mypy reference/queueref

# Fails on any counterexample; prints each condition's status (confirmed or not).
crosshair-queues: setup
	mkdir -p build
	$(BIN)/crosshair check --analysis_kind=icontract --report_all --per_condition_timeout=3 \
		reference/queueref/queue_semantics.py | tee build/crosshair-queues.txt
	! grep -q ": error:" build/crosshair-queues.txt

vectors: setup
	$(BIN)/queueref vectors --out build/vectors

proofs: setup
	$(BIN)/python tools/run_proofs.py

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
