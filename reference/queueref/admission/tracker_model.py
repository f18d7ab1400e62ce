"""A second statement of the request tracker, as plain dictionaries, for the test vectors.

The expectations of the tracker vectors (`queueref.oracle.vectors.tracker`)
are computed with this model, never with `queueref.admission.tracker`, so a vector
that replays clean is an agreement between two statements of
`specs/admission.md` ("The request tracker"). Each method returns the
expectation of one operation: `{"result": ...}` or `{"error": "<name>"}`.

Models no vLLM file (the tracker it restates models vLLM's `OutputProcessor`).
"""

from __future__ import annotations

from typing import Any

Expect = dict[str, Any]


class TrackerModel:
    """One server's tracker as plain dictionaries: what each operation returns or raises."""

    def __init__(self) -> None:
        self.states: dict[str, list[Any]] = {}  # internal id -> [parent, tokens, prefilling]
        self.parents: dict[str, list[str]] = {}
        self.reserved = 0

    def children(self, request_id: str, n: int) -> list[str]:
        return [request_id] if n == 1 else [f"{i}_{request_id}" for i in range(n)]

    def add(self, request_id: str, n: int, tokens: int) -> Expect:
        if n < 1 or tokens < 0:
            return {"error": "ValueError"}
        ids = self.children(request_id, n)
        if any(rid in self.states or rid in self.parents for rid in {request_id, *ids}):
            return {"error": "ValueError"}
        parent = request_id if n > 1 else None
        for rid in ids:
            self.states[rid] = [parent, tokens, True]
        if parent is not None:
            self.parents[parent] = list(ids)
        self.reserved -= min(self.reserved, n)
        return {"result": ids}

    def _drop(self, rid: str) -> None:
        parent = self.states.pop(rid)[0]
        if parent is not None:
            self.parents[parent].remove(rid)
            if not self.parents[parent]:
                del self.parents[parent]

    def abort(self, ids: list[str]) -> Expect:
        ended: list[str] = []
        for request_id in ids:
            if request_id in self.parents:
                targets = [rid for rid in self.states if rid in self.parents[request_id]]
            elif request_id in self.states:
                targets = [request_id]
            else:
                targets = []
            for rid in targets:
                self._drop(rid)
                ended.append(rid)
        return {"result": ended}

    def finish(self, rid: str) -> Expect:
        if rid not in self.states:
            return {"error": "KeyError"}
        self._drop(rid)
        return {"result": None}

    def prefill_done(self, rid: str) -> Expect:
        if rid not in self.states:
            return {"error": "KeyError"}
        self.states[rid][2] = False
        return {"result": None}

    def reserve(self, n: int) -> Expect:
        if n < 1:
            return {"error": "ValueError"}
        self.reserved += n
        return {"result": None}

    def release_reservation(self, n: int) -> Expect:
        if n < 1 or n > self.reserved:
            return {"error": "ValueError"}
        self.reserved -= n
        return {"result": None}

    def state(self) -> dict[str, int]:
        unfinished = len(self.states)
        return {
            "unfinished": unfinished,
            "queued_tokens": sum(s[1] for s in self.states.values() if s[2]),
            "reserved": self.reserved,
            "slot": unfinished + self.reserved,
        }
