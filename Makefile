# queueref: every check runs from here. The venv installs itself when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Deterministic Hypothesis runs under CI, larger ones locally.
HYPOTHESIS_PROFILE ?= $(if $(CI),ci,dev)
export HYPOTHESIS_PROFILE
PYTEST_WORKERS ?= 2

.PHONY: setup redis-server coq spin test soak lint types crosshair-queues generate proofs proofs-coq bound-table trace vectors bench mutation verify clean
.PHONY: help dist faults fault-tools upstream test-fast test-processes test-guards

$(STAMP): pyproject.toml
	mkdir -p build
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,serve,plot,store]'
	touch $(STAMP)

## setup: create .venv, install queueref with its test, serve, plot and store extras, and redis-server
setup: $(STAMP) redis-server

## redis-server: install redis-server when missing (apt-get as root; else a clear failure)
# The multi-node store is tested against a real redis-server (never a fake):
# installed here when missing, or a clear failure -- never a skip.
redis-server:
	@command -v redis-server >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get install -y -q redis-server || { apt-get update -q && apt-get install -y -q redis-server; }; \
	  else echo "redis-server is missing and this is not root: install it (apt-get install redis-server)" >&2; exit 1; fi; }

## test: pytest: test-fast, test-processes and test-guards, one after the other
# Three runs: the in-process tests on every core, then the tests that start real
# processes and servers one at a time, so they never compete for the cores (or ports),
# then the `guard` tests with contracts off (python -O): bad input is refused without
# icontract too. Only the guards: the whole suite under -O takes about 20 minutes here.
test: test-fast test-processes test-guards

## test-fast: pytest: the in-process tests on every core
test-fast: setup coq spin
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not multiprocess and not e2e and not slow and not faults"

## test-processes: pytest: the tests that start real processes and servers, one at a time
test-processes: setup
	$(BIN)/python -m pytest -q -m "(multiprocess or e2e) and not slow and not faults" tests

## test-guards: pytest under python -O: the guards refuse bad input without icontract
test-guards: setup
	$(BIN)/python -O -m pytest -q -n $(PYTEST_WORKERS) \
		-m "guard and not contracts and not multiprocess and not e2e and not slow"

## soak: the slow tests, serially: the serve soak run (E2E-SOAK-1) and the oracle's fresh-venv install
# Not part of `make test`: about 90 s and 2,000 connections, and a pip install from the registry.
soak: setup
	$(BIN)/python -m pytest -q -m slow tests

## lint: ruff check and ruff format --check
lint: setup
	$(BIN)/ruff check reference tests proofs tools
	$(BIN)/ruff format --check reference tests proofs tools

## types: mypy --strict on the package, its tests and tools, and the proofs generator with what it writes
types: setup
	$(BIN)/mypy reference/queueref tests tools proofs/mutations.py proofs/generate.py \
		proofs/queue_obligations.py proofs/mutants proofs/generated

## crosshair-queues: CrossHair on the queue semantics; fails on any counterexample
# Fails on any counterexample; prints each condition's status (confirmed or not).
crosshair-queues: setup
	mkdir -p build
	$(BIN)/crosshair check --analysis_kind=icontract --report_all --per_condition_timeout=3 \
		reference/queueref/queues/semantics.py | tee build/crosshair-queues.txt
	! grep -q ": error:" build/crosshair-queues.txt

## vectors: write the test vectors to build/vectors and replay them
vectors: setup
	$(BIN)/queueref vectors --out build/vectors

## generate: rewrite every generated file: obligations, mutants, manifests, broken copies
generate: setup
	$(BIN)/python proofs/generate.py

## proofs: fail on a stale generated file, then every CrossHair obligation and its mutant refuted for the condition it names
proofs: setup
	$(BIN)/python proofs/generate.py --check
	$(BIN)/python tools/run_proofs.py

## mutation: mutation testing of the reference (slow, not in verify; SAMPLE=60, MODULES=queues,waiting)
SAMPLE ?=
MODULES ?=
mutation: setup
	$(BIN)/python -m pip install -q -e '.[mutation]'
	nice -n 10 $(BIN)/python tools/mutation.py $(if $(SAMPLE),--sample $(SAMPLE)) \
		$(if $(MODULES),--modules $(MODULES))

## coq: install Coq when missing (apt-get as root; else a clear failure)
# Coq 8.16 (Debian's package `coq`) checks proofs/coq. Installed when missing and we are
# root; otherwise one line says so and the step fails -- never a silent skip.
coq:
	@command -v coqc >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ]; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y coq \
		|| { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y coq; }; \
	else \
		echo "coqc not found and not root: install Coq (apt-get install -y coq as root)" >&2; \
		exit 1; \
	fi

## spin: install Spin and a C compiler when missing (apt-get as root; else a clear failure)
# Spin 6.5 (Debian's package `spin`) is the explorer's second engine (OB-TABLE-3): the
# tests compare it with the explorer, the benchmark times both. Never a silent skip.
spin:
	@{ command -v spin >/dev/null 2>&1 && command -v cc >/dev/null 2>&1; } || \
	if [ "$$(id -u)" = 0 ]; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y spin gcc \
		|| { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y spin gcc; }; \
	else \
		echo "spin or cc not found and not root: install them (apt-get install -y spin gcc as root)" >&2; \
		exit 1; \
	fi

## proofs-coq: every Coq theorem of proofs/coq closed (no axiom), its mutants refuted at a proof step, the Python traces accepted
proofs-coq: setup coq
	$(BIN)/python tools/run_coq.py

## bound-table: the exhaustive bound table, checked against an independent formula
bound-table: setup
	$(BIN)/python tools/bound_table.py

## trace: traceability: every requirement ID defined, tested, enforced or proved
trace: setup
	$(BIN)/python tools/trace.py

## bench: per-operation cost of the queues and of admission, beside vLLM 0.33.0's own code
# vLLM is the release in make upstream's cache (QUEUEREF_VLLM_CACHE), installed there when missing.
bench: setup spin
	$(BIN)/python tools/bench.py

## dist: build queueref's wheel and sdist into dist/ (it is not on the package index: install these)
dist: setup
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
## upstream: vLLM 0.30.0-0.33.0's own code under queueref's checks (downloads ~10 GB into a cache the first time)
# The releases go into the cache QUEUEREF_VLLM_CACHE names (default ~/.cache/queueref/vllm), outside
# the checkout, reused between runs; writes build/upstream-report.json.
upstream:
	nice -n 5 $(PY) tools/upstream.py

## verify: every check above, and the verification report
verify: setup
	$(BIN)/python tools/verify.py

## clean: remove build/, .venv and the tool caches
clean:
	rm -rf build .venv .mypy_cache .ruff_cache .hypothesis

## faults: every fault across serve --store nodes under load (root): build/faults-report.json
# partition (the run's own network namespace, a link taken down), redis-restart, failover
# (Sentinel, one replica), node-kill (kill -9 of a node's group), pause (SIGSTOP past the
# lease), tokens; every store protocol. Installs iproute2, redis-server and redis-sentinel
# when missing (apt-get as root; else a clear failure -- never a skip). About 5 minutes.
faults: setup fault-tools
	$(BIN)/python -m pytest -q -m faults tests
	$(BIN)/python tools/faults.py

## fault-tools: install ip (iproute2), redis-server and redis-sentinel when missing (root)
fault-tools:
	@missing=""; \
	for pair in ip:iproute2 redis-server:redis-server redis-sentinel:redis-sentinel; do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 $$missing \
	    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
	         apt-get install -y -q -o DPkg::Lock::Timeout=300 $$missing; }; \
	  else echo "make faults needs root (network namespaces) and$$missing: run it as root" >&2; \
	    exit 1; fi; \
	fi

## help: this list: one line per target
help:
	@awk '/^## [a-z-]+: /{sub(/^## /, ""); name = $$0; sub(/:.*/, "", name); \
		sub(/^[^:]*: /, ""); printf "  %-17s %s\n", name, $$0}' $(MAKEFILE_LIST)
