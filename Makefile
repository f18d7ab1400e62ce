# queueref: every check runs from here. The venv installs itself when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Deterministic Hypothesis runs under CI, larger ones locally.
HYPOTHESIS_PROFILE ?= $(if $(CI),ci,dev)
export HYPOTHESIS_PROFILE
PYTEST_WORKERS ?= 2

.PHONY: setup redis-server test lint types crosshair-queues proofs bound-table trace vectors bench verify clean

$(STAMP): pyproject.toml
	mkdir -p build
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,serve,plot,store]'
	touch $(STAMP)

setup: $(STAMP) redis-server

# The multi-node store is tested against a real redis-server (never a fake):
# installed here when missing, or a clear failure -- never a skip.
redis-server:
	@command -v redis-server >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get install -y -q redis-server || { apt-get update -q && apt-get install -y -q redis-server; }; \
	  else echo "redis-server is missing and this is not root: install it (apt-get install redis-server)" >&2; exit 1; fi; }

# Two runs: the in-process tests on every core, then the tests that start real
# processes and servers one at a time, so they never compete for the cores (or ports).
test: setup
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not multiprocess and not e2e"
	$(BIN)/python -m pytest -q -m "multiprocess or e2e" tests

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
