"""The pytest plugin of queueref, registered by entry point (`pytest11`).

Any project that installs queueref gets two fixtures:

* `queueref_conformance` -- `queueref_conformance(MyQueue, "fcfs")` runs
  `queueref.oracle.check_request_queue` (ORC-PLUG-1);
* `queueref_laws` -- `queueref_laws(MyQueue)` runs
  `queueref.oracle.check_queue_laws` (ORC-PLUG-1).

pytest loads this module in every run of every project that has queueref
installed, so importing it costs nothing: it imports neither Hypothesis nor
the checkers; the fixtures import them when called (ORC-PLUG-2).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

Checker = Callable[..., None]


def _checker(name: str) -> Checker:
    """ORC-PLUG-2: the checker, imported (with Hypothesis) only now."""
    module = importlib.import_module("queueref.oracle.conformance")
    checker: Checker = getattr(module, name)
    return checker


@pytest.fixture
def queueref_conformance() -> Checker:
    """ORC-PLUG-1: `queueref_conformance(factory, policy, **options)` checks a queue.

    The options are those of `queueref.oracle.check_request_queue`
    (`request_factory`, `max_examples`, `strict`); a disagreement fails the
    test with a `ConformanceError` holding the failing program.
    """

    def check(factory: Callable[[], Any], policy: str, **options: Any) -> None:
        __tracebackhide__ = True
        _checker("check_request_queue")(factory, policy, **options)

    return check


@pytest.fixture
def queueref_laws() -> Checker:
    """ORC-PLUG-1: `queueref_laws(factory, **options)` checks the laws of any RequestQueue."""

    def check(factory: Callable[[], Any], **options: Any) -> None:
        __tracebackhide__ = True
        _checker("check_queue_laws")(factory, **options)

    return check
