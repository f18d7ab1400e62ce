"""RQ-IMPL-2: a queue copied through `pickle` or `copy.deepcopy` behaves as the original.

Seeded random operations (add, prepend, pop, remove, `remove_requests`,
`prepend_requests`) run on an original queue; at a random point it is copied with
its requests, and the same operations, naming requests by id, then run on both,
which must hold the same requests in the same order after each. The last test
plants the bug this catches: the priority queue's tombstone made an `object()`,
which every copy turns into another object that the copy then hands out as a
request.
"""

from __future__ import annotations

import copy
import pickle
import random
from collections.abc import Callable
from typing import Any

import pytest
from queue_operations import ids, operations

import queueref.queues.priority
from queueref import FCFSRequestQueue, PriorityRequestQueue, Request, RequestQueue

COPIERS: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda state: pickle.loads(pickle.dumps(state)),
    "deepcopy": copy.deepcopy,
}


def run(queue: RequestQueue, requests: dict[str, Request], op: tuple[Any, ...]) -> str:
    """Apply `op` to `queue`; what it returned or raised."""
    kind, *ids = op
    try:
        if kind in ("add_request", "prepend_request"):
            requests.setdefault(ids[0], Request(ids[0], len(ids[0]) % 3, float(len(requests))))
            getattr(queue, kind)(requests[ids[0]])
        elif kind == "pop_request":
            popped: Request = queue.pop_request()
            return f"popped {popped.request_id}"
        elif kind == "remove_request":
            queue.remove_request(requests[ids[0]])
        elif kind == "remove_requests":
            queue.remove_requests([requests[i] for i in ids])
        else:  # prepend_requests: a new queue of the same kind, of new requests
            other = type(queue)()
            for rid in ids:
                requests[rid] = Request(rid, 1, -float(len(requests)))
                other.add_request(requests[rid])
            queue.prepend_requests(other)
        return "ok"
    except Exception as error:  # compared between the two queues, never ignored
        return f"{type(error).__name__}: {error}"


@pytest.mark.parametrize("copier", sorted(COPIERS))
@pytest.mark.parametrize("kind", [FCFSRequestQueue, PriorityRequestQueue])
def test_rq_impl_2_a_copied_queue_goes_on_as_the_original(kind: type, copier: str) -> None:
    for seed in range(60):
        rng = random.Random(f"{kind.__name__}-{copier}-{seed}")
        ops = operations(rng, 40)
        split = rng.randint(5, 30)
        queue, requests = kind(), dict[str, Request]()
        for op in ops[:split]:
            run(queue, requests, op)
        twin, twin_requests = COPIERS[copier]((queue, requests))
        assert ids(twin) == ids(queue) and len(twin) == len(queue)
        for op in ops[split:]:
            assert run(twin, twin_requests, op) == run(queue, requests, op), (seed, op)
            assert ids(twin) == ids(queue) and len(twin) == len(queue), (seed, op)


@pytest.mark.parametrize("copier", sorted(COPIERS))
def test_rq_impl_2_a_tombstone_that_copies_into_another_object_is_caught(
    copier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planted bug: a tombstone that copies into another object (no `__reduce__`,
    as an `object()` would). After a removal leaves a tombstone in the heap, the copy
    no longer recognises it and hands it out as a request."""
    monkeypatch.delattr(queueref.queues.priority._Tombstone, "__reduce__")
    queue = PriorityRequestQueue()
    a, b = Request("a", 0, 0.0), Request("b", 1, 1.0)
    queue.add_request(a)
    queue.add_request(b)
    queue.remove_request(b)  # b's entry stays in the heap as a tombstone
    twin = COPIERS[copier](queue)
    handed_out = list(twin)  # one request queued, two things handed out
    assert len(twin) == 1 and len(handed_out) == 2
    assert handed_out[0].request_id == "a" and not isinstance(handed_out[1], Request)
