"""Deliberately broken trackers shared by the admission tests (importable, so spawn can pickle):
each is `RequestTracker` with one named change (`method_variants.broken_class`)."""

from __future__ import annotations

from method_variants import Change, broken_class

from queueref import RequestTracker

LazyRefreshTracker = broken_class(
    RequestTracker,
    "LazyRefreshTracker",
    Change(
        "add",
        "refreshes the slot on finish and abort, but not on add",
        "self._refresh()\n    return ids",
        "return ids",
    ),
)

StalePrefillTracker = broken_class(
    RequestTracker,
    "StalePrefillTracker",
    Change(
        "prefill_done",
        "`prefill_done` leaves counter 1 as it was (the tokens stay queued)",
        "self._refresh_tokens()",
        "pass",
    ),
)
