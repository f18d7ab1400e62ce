"""The pytest plugin of queueref, registered by entry point (`pytest11`).

Any project that installs queueref gets two fixtures:

* `queueref_conformance` -- `queueref_conformance(MyQueue, "fcfs")` runs
  `queueref.oracle.check_request_queue` (ORC-PLUG-1);
* `queueref_laws` -- `queueref_laws(MyQueue)` runs
  `queueref.oracle.check_queue_laws` (ORC-PLUG-1).

pytest loads this module in every run of every project that has queueref
installed, so importing it costs nothing: it imports neither Hypothesis nor
the checkers; the fixtures import them when a test asks for one (ORC-PLUG-2).
Without Hypothesis, such a test fails at the fixture with one line that says
`pip install 'hypothesis>=6.100,<7'` (ORC-INST-1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from queueref.oracle import HypothesisMissing, import_checkers

Checker = Callable[..., None]


def _checker(name: str) -> Checker:
    """ORC-PLUG-2: the checker, imported (with Hypothesis) only now.

    ORC-INST-1: without Hypothesis the fixture fails with one line, no traceback.
    """
    try:
        module = import_checkers()
    except HypothesisMissing as missing:
        problem = str(missing)
    else:
        checker: Checker = getattr(module, name)
        return checker
    pytest.fail(problem, pytrace=False)  # outside the except: no chained exception shown


@pytest.fixture
def queueref_conformance() -> Checker:
    """ORC-PLUG-1: `queueref_conformance(factory, policy, **options)` checks a queue.

    The options are those of `queueref.oracle.check_request_queue`
    (`request_factory`, `max_examples`, `max_calls`, `initial_requests`,
    `max_failures`, `ties`, `strict`); a disagreement fails the test with a
    `ConformanceError` listing every failing program and its clause.
    """
    checker = _checker("check_request_queue")

    def check(factory: Callable[[], Any], policy: str, **options: Any) -> None:
        __tracebackhide__ = True
        checker(factory, policy, **options)

    return check


@pytest.fixture
def queueref_laws() -> Checker:
    """ORC-PLUG-1: `queueref_laws(factory, **options)` checks the laws of any RequestQueue."""

    checker = _checker("check_queue_laws")

    def check(factory: Callable[[], Any], **options: Any) -> None:
        __tracebackhide__ = True
        checker(factory, **options)

    return check
