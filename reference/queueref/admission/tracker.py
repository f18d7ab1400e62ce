"""Per-server bookkeeping of unfinished requests (vLLM's `OutputProcessor` role).

Models the request bookkeeping of `vllm/v1/engine/output_processor.py` (`add_request`,
`abort_requests`, `_finish_request`, `get_num_unfinished_requests`,
`get_num_queued_tokens`, `_update_admission_stats`) and the fan-out of parallel
sampling in `vllm/v1/engine/async_llm.py` / `parallel_sampling.py`.

Deliberate divergences from vLLM:

* `add` registers all `n` children of a request in one call, all or nothing; vLLM
  0.30.0 awaits between two children, which lets a second check pass in between
  (vLLM 0.33.0 registers them all before its first `await`, as here).
* An id already tracked (as a request or a parent) is a `ValueError`; vLLM 0.30.0
  treats it as a streaming update. Streaming input is not modelled.
* No external-id map: the request id names the request (n == 1) or the parent.
* The slot holds `unfinished + reserved`, `reserved` counting the write-then-check
  reservations (vLLM 0.30.0 has none: the slot is the unfinished count there too).
* `finish` of an unknown id is a `KeyError` (vLLM 0.30.0's `_finish_request` is
  private and only called on known states).
* With `share_tokens` counter 1 of the slot holds the queued prompt tokens (plus
  token reservations); vLLM 0.30.0 keeps them in the process and writes no counter 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.validators import is_int_at_least


def child_request_id(request_id: str, index: int) -> str:
    """The id of child `index` of a parallel-sampling request, as vLLM names it."""
    return f"{index}_{request_id}"


def child_request_ids(request_id: str, n: int) -> list[str]:
    """The internal ids of a request of `n` samples: itself for n == 1, else n children."""
    if n == 1:
        return [request_id]
    return [child_request_id(request_id, index) for index in range(n)]


@dataclass
class _RequestState:
    """One internal request: its parent (if a child) and its prompt length."""

    parent_id: str | None
    num_prompt_tokens: int
    is_prefilling: bool = True


# O(1) reads of the fields for the check: a public method would run the invariants.
def tracker_counts(tracker: RequestTracker) -> tuple[int, int, int, int]:
    """Unfinished requests, reservations, queued tokens and token reservations."""
    return len(tracker._states), tracker._reserved, tracker._queued_tokens, tracker._reserved_tokens


def own_slot_count(tracker: RequestTracker) -> int:
    """Counter 0 of the own slot: unfinished requests plus reservations (the local count
    a check without shared stats reads)."""
    return len(tracker._states) + tracker._reserved


def own_slot_tokens(tracker: RequestTracker) -> int:
    """Counter 1 of the own slot when shared: queued tokens plus token reservations (the
    own tokens the local token check reads)."""
    return tracker._queued_tokens + tracker._reserved_tokens


class RequestTracker:
    """The unfinished requests of one API server, and its slot refresh: at exactly three
    exits (`add`, `abort`, `finish`) plus the reservation writes of write-then-check.
    With `share_tokens` counter 1 of the slot holds the queued prompt tokens too."""

    def __init__(
        self, shared_stats: SharedAdmissionStats | None = None, *, share_tokens: bool = False
    ) -> None:
        self._stats = shared_stats
        self._states: dict[str, _RequestState] = {}
        self._parents: dict[str, dict[str, None]] = {}  # parent -> live children, ordered
        self._queued_tokens = 0
        self._reserved = 0
        self._reserved_tokens = 0
        self._shares_tokens = False
        if share_tokens:
            self.share_tokens()

    @property
    def shares_tokens(self) -> bool:
        """Whether counter 1 of the own slot holds the queued tokens."""
        return self._shares_tokens

    @property
    def num_reserved_tokens(self) -> int:
        """Token reservations written by write-then-check checks, not yet registered."""
        return self._reserved_tokens

    def share_tokens(self) -> None:
        """From now on write the queued tokens to counter 1 of the own slot; writes it now."""
        self._shares_tokens = True
        self._refresh_tokens()

    @property
    def shared_stats(self) -> SharedAdmissionStats | None:
        """The shared counters this tracker refreshes, or None."""
        return self._stats

    @property
    def num_reserved(self) -> int:
        """Reservations written by write-then-check checks, not yet registered."""
        return self._reserved

    def get_num_unfinished_requests(self) -> int:
        """The number of internal requests not finished or aborted."""
        return len(self._states)

    def get_num_queued_tokens(self) -> int:
        """The prompt tokens of the requests still in prefill."""
        return self._queued_tokens

    def has_request(self, request_id: str) -> bool:
        """Whether `request_id` is a tracked internal request or parent."""
        return request_id in self._states or request_id in self._parents

    def request_ids(self) -> list[str]:
        """The internal ids tracked, in registration order."""
        return list(self._states)

    def children_of(self, request_id: str) -> list[str]:
        """The internal ids an abort of `request_id` would end."""
        if request_id in self._parents:
            # O(k): the parent's live children, in registration order.
            return list(self._parents[request_id])
        if request_id in self._states:
            return [request_id]
        return []

    def _refresh(self) -> None:
        """Write this server's count to its own slot."""
        if self._stats is not None:
            self._stats.set_num_requests(own_slot_count(self))
        self._refresh_tokens()

    def _refresh_tokens(self) -> None:
        """Write this server's queued + reserved tokens to counter 1, when they are shared."""
        if self._stats is not None and self._shares_tokens:
            self._stats.set_num_queued_tokens(own_slot_tokens(self))

    def check_new_request(self, request_id: str, n: int = 1, num_prompt_tokens: int = 1) -> None:
        """Raise `ValueError` when `add(request_id, n, num_prompt_tokens)` would."""
        if not isinstance(request_id, str):
            raise ValueError(f"ADM-TRK-1: a request id is a str, got {request_id!r}")
        if not is_int_at_least(n, 1):
            raise ValueError(f"ADM-CTL-2: n must be an int >= 1, got {n!r}")
        if not is_int_at_least(num_prompt_tokens, 0):
            raise ValueError(
                f"ADM-TRK-4: num_prompt_tokens must be an int >= 0, got {num_prompt_tokens!r}"
            )
        ids = child_request_ids(request_id, n)
        taken = [rid for rid in {request_id, *ids} if self.has_request(rid)]
        if taken:
            raise ValueError(f"ADM-TRK-1: ids already tracked: {sorted(taken)}")

    def add(self, request_id: str, n: int = 1, num_prompt_tokens: int = 1) -> list[str]:
        """Register a request of `n` parallel samples, all or nothing; return its internal
        ids (`[request_id]`, or the children `0_<id>` .. `<n-1>_<id>`), each in prefill
        with `num_prompt_tokens` tokens. Up to `n` reservations become the real count."""
        self.check_new_request(request_id, n, num_prompt_tokens)
        ids = child_request_ids(request_id, n)
        parent_id = request_id if n > 1 else None
        for rid in ids:
            self._states[rid] = _RequestState(parent_id, num_prompt_tokens)
        if parent_id is not None:
            self._parents[parent_id] = dict.fromkeys(ids)
        self._queued_tokens += n * num_prompt_tokens
        # ADM-TRK-7: the reservation of a write-then-check admission becomes the real count.
        self._reserved -= min(self._reserved, n)
        self._reserved_tokens -= min(self._reserved_tokens, n * num_prompt_tokens)
        self._refresh()
        return ids

    def _drop(self, request_id: str) -> None:
        """Forget one internal request and, with its last child, its parent."""
        state = self._states.pop(request_id)
        if state.is_prefilling:
            self._queued_tokens -= state.num_prompt_tokens
        if state.parent_id is not None:
            children = self._parents[state.parent_id]
            children.pop(request_id, None)
            if not children:
                del self._parents[state.parent_id]

    def abort(self, request_ids: str | Iterable[str]) -> list[str]:
        """Abort one id or several (a parent cascades to its remaining children; unknown
        ids are ignored, as vLLM 0.30.0); return the internal ids ended. The slot is
        refreshed, even when nothing was aborted."""
        wanted = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        for request_id in wanted:  # validate all first: a bad id must change nothing
            if not isinstance(request_id, str):
                raise TypeError(f"ADM-TRK-2: request ids are str, got {request_id!r}")
        aborted: list[str] = []
        for request_id in wanted:
            for rid in self.children_of(request_id):
                self._drop(rid)
                aborted.append(rid)
        self._refresh()
        return aborted

    def finish(self, request_id: str) -> None:
        """An internal request finished normally; the slot is refreshed."""
        self._drop(request_id)
        self._refresh()

    def prefill_done(self, request_id: str) -> None:
        """The first output arrived: the prompt no longer queues. Not an exit: counter 0 is
        not written (counter 1 is, when shared). Again is a no-op (vLLM 0.30.0 clears
        `is_prefilling` on every output)."""
        state = self._states[request_id]
        if state.is_prefilling:
            state.is_prefilling = False
            self._queued_tokens -= state.num_prompt_tokens
        self._refresh_tokens()

    def prefill_tokens(self, request_id: str) -> int:
        """The tokens `prefill_done(request_id)` takes out of the count (0 if out of prefill)."""
        state = self._states.get(request_id)
        if state is None:
            raise KeyError(f"ADM-TRK-4: unknown request {request_id!r}")
        return state.num_prompt_tokens if state.is_prefilling else 0

    def reserve(self, n: int) -> None:
        """Add `n` to the own slot before reading it: write-then-check."""
        self._reserved += n
        self._refresh()

    def release_reservation(self, n: int) -> None:
        """Write a reservation back: the rollback of a rejected check."""
        self._reserved -= n
        self._refresh()

    def reserve_tokens(self, tokens: int) -> None:
        """Add `tokens` to counter 1 of the own slot before reading: write-then-check."""
        self._reserved_tokens += tokens
        self._refresh_tokens()

    def release_token_reservation(self, tokens: int) -> None:
        """Write a token reservation back: the rollback of a rejected check."""
        self._reserved_tokens -= tokens
        self._refresh_tokens()
