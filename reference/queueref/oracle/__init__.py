"""queueref as an oracle in other projects' tests.

* `check_request_queue(factory, policy)` -- compare a `RequestQueue` with the
  reference for a policy (ORC-CRQ-1);
* `check_queue_laws(factory)` -- the laws every `RequestQueue` obeys, for
  queues with their own order (ORC-LAW-1 to ORC-LAW-6);
* `check_admission_trace(events, num_servers, max_num_queued_reqs)` -- replay
  a recorded admission trace (ORC-TR-1);
* `ConformanceError` -- what the queue checks raise.

The names are imported lazily: `import queueref.oracle` (and the pytest
plugin, which pytest loads in every run of anyone who installs queueref) does
not import Hypothesis; the queue checks import it when first used (ORC-PLUG-2).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from queueref.oracle.errors import ConformanceError, HypothesisMissing
from queueref.trace.files import TraceFormatError

if TYPE_CHECKING:
    from queueref.oracle.conformance import check_queue_laws, check_request_queue
    from queueref.oracle.trace_check import check_admission_trace
    from queueref.oracle.trace_report import TraceReport

_LAZY = {
    "check_request_queue": "queueref.oracle.conformance",
    "check_queue_laws": "queueref.oracle.conformance",
    "check_admission_trace": "queueref.oracle.trace_check",
    "TraceReport": "queueref.oracle.trace_report",
}

__all__ = [
    "ConformanceError",
    "HypothesisMissing",
    "TraceFormatError",
    "TraceReport",
    "check_admission_trace",
    "check_queue_laws",
    "check_request_queue",
]


def __getattr__(name: str) -> Any:
    """ORC-PLUG-2: import the checkers (and Hypothesis) only when they are used."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'queueref.oracle' has no attribute {name!r}")
    return getattr(import_checkers(module), name)


def version() -> str:
    """The installed Hypothesis version, on which the verdict depends (ORC-CRQ-4)."""
    import hypothesis

    return str(hypothesis.__version__)


def import_checkers(module: str = "queueref.oracle.conformance") -> ModuleType:
    """ORC-INST-1: import a checker module; without Hypothesis, say how to install it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != "hypothesis":
            raise
        raise HypothesisMissing() from None
