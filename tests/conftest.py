"""Test-wide settings: deep contracts on, `python -O` passed on to workers, Hypothesis profiles;
and `server`, a real Redis of its own for each runtime test that asks for one.

Profiles (select with HYPOTHESIS_PROFILE; the Makefile picks `ci` under CI=true):
- `ci`: derandomized, so a run on a clean clone never flakes;
- `dev`: the local default for `make verify`, more examples, random seeds;
- `thorough`: for a long local run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

# `python -O -m pytest -n 2` would test with contracts on: pytest-xdist starts its workers
# as plain `python`, so the flag reaches them only through the environment.
if sys.flags.optimize:
    os.environ["PYTHONOPTIMIZE"] = str(sys.flags.optimize)

# Whole-structure contracts (RQ-IMPL-1, RQ-PRI-6, ...) are for tests: on before queueref loads.
os.environ.setdefault("QUEUEREF_DEEP_CHECKS", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Nothing of queueref is imported here: a package that fails to import must fail
# tests/package/test_import.py, not every file's collection. `queueref.config` reads
# the variable when it loads; only when something loaded it before this file is it
# told now.
if "queueref.config" in sys.modules:
    sys.modules["queueref.config"].set_deep_checks(
        os.environ["QUEUEREF_DEEP_CHECKS"] not in ("", "0")
    )

_common: dict[str, Any] = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=60, derandomize=True, database=None, **_common)
settings.register_profile("dev", max_examples=120, **_common)
settings.register_profile("thorough", max_examples=2000, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# tests/upstream runs vLLM's own released code: only under `make upstream`, which sets
# QUEUEREF_UPSTREAM_RELEASE and puts that release on the path (tools/upstream.py).
# Elsewhere the folder is not collected (excluded, not skipped).
collect_ignore = [] if os.environ.get("QUEUEREF_UPSTREAM_RELEASE") else ["upstream"]

if TYPE_CHECKING:
    from queueref.runtime.store.redis_server import RedisServer


@pytest.fixture
def server() -> Iterator[RedisServer]:
    """A `redis-server` started for the test on a free loopback port, stopped after it."""
    from queueref.runtime.store.redis_server import RedisServer  # not at collection: above

    redis_server = RedisServer()
    redis_server.start()
    try:
        yield redis_server
    finally:
        redis_server.close()
