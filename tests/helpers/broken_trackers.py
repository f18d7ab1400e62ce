"""Deliberately broken trackers shared by the admission tests (importable, so spawn can pickle)."""

from __future__ import annotations

from queueref import RequestTracker


class LazyRefreshTracker(RequestTracker):
    """Deliberately broken: refreshes the slot on finish and abort, but not on add."""

    _in_add = False

    def add(self, request_id: str, n: int = 1, num_prompt_tokens: int = 1) -> list[str]:
        self._in_add = True
        try:
            return super().add(request_id, n, num_prompt_tokens)
        finally:
            self._in_add = False

    def _refresh(self) -> None:
        if not self._in_add:
            super()._refresh()


class StalePrefillTracker(RequestTracker):
    """Deliberately broken: `prefill_done` leaves counter 1 as it was (the tokens stay queued)."""

    _in_prefill_done = False

    def prefill_done(self, request_id: str) -> None:
        self._in_prefill_done = True
        try:
            super().prefill_done(request_id)
        finally:
            self._in_prefill_done = False

    def _refresh_tokens(self) -> None:
        if not self._in_prefill_done:
            super()._refresh_tokens()
