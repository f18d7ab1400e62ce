"""Run-time switches of the reference.

`DEEP_CHECKS` turns on the whole-structure O(n) contracts (heap property over
the whole heap, index consistent with the structure, ...). They are for tests:
`tests/conftest.py` sets `QUEUEREF_DEEP_CHECKS=1`. By default every contract
costs O(1) or O(log n) per call.

icontract itself can be switched off for benchmarks with `python -O` (every
contract is disabled when `__debug__` is false).
"""

from __future__ import annotations

import os

DEEP_CHECKS: bool = os.environ.get("QUEUEREF_DEEP_CHECKS", "") not in ("", "0")


def set_deep_checks(enabled: bool) -> None:
    """Switch the whole-structure contracts on or off at run time."""
    global DEEP_CHECKS
    DEEP_CHECKS = enabled


def deep_checks() -> bool:
    """Whether whole-structure contracts run (read at call time, so tests can flip it)."""
    return DEEP_CHECKS
