"""What our two queues promise beyond the `RequestQueue` clauses: the FCFS and priority tables.

Each table is the postcondition of a method, as clauses ("ID: what holds", and
a test of the queue, the argument and the call's snapshot `_Before`), read by
`queueref.queues.contracts` in order: the first that fails names the
violation. The structure clauses come first (the others read the structure);
they also bind each queue's own `__init__`. Clauses marked `_deep` cost O(n)
and run only under deep checks. They read the queues' private structure (the
deque, the heap, the id index): that is what they check.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping
from typing import Any

from queueref.queues.base import RequestQueue
from queueref.queues.checks import Clause, _Before, _deep, _ids_of, _same_items
from queueref.queues.fcfs import FCFSRequestQueue
from queueref.queues.priority import _REMOVED, PriorityRequestQueue, _Entry
from queueref.request import request_key

# --- FCFSRequestQueue ----------------------------------------------------------------


def _fcfs_index_matches(queue: FCFSRequestQueue) -> bool:
    return all(queue._index.get(r.request_id) is r for r in queue._items)


#: RQ-IMPL-1 after every change (and after `__init__`): the cheap half always, the
#: whole comparison under deep checks. A postcondition clause rather than a class
#: invariant, which icontract would check before and after every call, reads included.
_FCFS_STRUCTURE: tuple[Clause, ...] = (
    (
        "RQ-IMPL-1: the id index holds exactly the queued requests",
        lambda q, a, old: len(q._items) == len(q._index),
    ),
    _deep(
        "RQ-IMPL-1: every queued request is indexed by its id",
        lambda q, a, old: _fcfs_index_matches(q),
    ),
)


_FCFS_POST: dict[str, tuple[Clause, ...]] = {
    "add_request": (
        ("RQ-FCFS-1: add appends", lambda q, r, old: q._items[-1] is r),
        (
            "RQ-FCFS-1: add leaves the front where it was",
            lambda q, r, old: old.head is None or q._items[0] is old.head,
        ),
        _deep(
            "RQ-FCFS-1: add keeps the order of the queued requests",
            lambda q, r, old: old.items is None or _same_items(q, [*old.items, r]),
        ),
    ),
    "pop_request": (
        (
            "RQ-FCFS-2: pop takes the front; the second request becomes the front",
            lambda q, r, old: old.second is None or q._items[0] is old.second,
        ),
        _deep(
            "RQ-FCFS-2: pop keeps the order of the rest",
            lambda q, r, old: old.items is None or _same_items(q, old.items[1:]),
        ),
    ),
    "peek_request": (
        ("RQ-ALL-5: peek is the front", lambda q, r, old: r is q._items[0]),
        _deep(
            "RQ-ALL-5: peek does not change the queue",
            lambda q, r, old: _same_items(q, old.items),
        ),
    ),
    "prepend_request": (
        ("RQ-FCFS-3: prepend puts it in front", lambda q, r, old: q._items[0] is r),
        (
            "RQ-FCFS-3: the old front is now second",
            lambda q, r, old: old.head is None or q._items[1] is old.head,
        ),
        _deep(
            "RQ-FCFS-3: prepend keeps the order of the queued requests",
            lambda q, r, old: old.items is None or _same_items(q, [r, *old.items]),
        ),
    ),
    "prepend_requests": (
        (
            "RQ-FCFS-4: prepend_requests puts the other queue in front, reversed",
            lambda q, rs, old: (
                list(itertools.islice(q._items, len(old.incoming))) == old.incoming[::-1]
            ),
        ),
        _deep(
            "RQ-FCFS-4: the queued requests follow, in their order",
            lambda q, rs, old: old.items is None or _same_items(q, old.incoming[::-1] + old.items),
        ),
    ),
    "remove_request": (
        ("RQ-ALL-6: the request is gone", lambda q, r, old: r not in q),
        _deep(
            "RQ-ALL-6: the other requests keep their order",
            lambda q, r, old: (
                old.items is None or _same_items(q, [x for x in old.items if x is not r])
            ),
        ),
    ),
    "remove_requests": (
        _deep(
            "RQ-ALL-7: the remaining requests keep their order",
            lambda q, rs, old: (
                old.items is None
                or old.present is None
                or _same_items(q, [r for r in old.items if all(r is not x for x in old.incoming)])
            ),
        ),
    ),
}

#: What `FCFSRequestQueue` adds to the postcondition of each method. The structure
#: first: the other clauses read it. Peek changes nothing here.
_FCFS_CLAUSES: Mapping[str, tuple[Clause, ...]] = {
    method: (() if method == "peek_request" else _FCFS_STRUCTURE) + clauses
    for method, clauses in _FCFS_POST.items()
}


# --- PriorityRequestQueue -------------------------------------------------------------


def _heap_ordered(heap: list[_Entry]) -> bool:
    return all(heap[(i - 1) // 2][:2] <= heap[i][:2] for i in range(1, len(heap)))


def _priority_index_matches(queue: PriorityRequestQueue) -> bool:
    live = [e for e in queue._heap if e[2] is not _REMOVED]
    return len(live) == len(queue._index) and all(
        queue._index.get(e[2].request_id) is e[2] for e in live
    )


#: RQ-IMPL-1 and RQ-PRI-6 after every change (see `_FCFS_STRUCTURE`).
_PRIORITY_STRUCTURE: tuple[Clause, ...] = (
    (
        "RQ-IMPL-1: every queued request has a heap entry",
        lambda q, a, old: len(q._heap) >= len(q._index),
    ),
    _deep(
        "RQ-PRI-6: the heap property holds for every entry",
        lambda q, a, old: _heap_ordered(q._heap),
    ),
    _deep(
        "RQ-IMPL-1: the id index holds exactly the live heap entries",
        lambda q, a, old: _priority_index_matches(q),
    ),
)


def _in_key_order(queue: RequestQueue, old: list[Any] | None, new: list[Any]) -> bool:
    return old is None or list(queue) == sorted(old + new, key=request_key)


#: `request_key` as one C-level call (the clauses below run on every add and pop).
_key_of = operator.attrgetter("priority", "arrival_time", "request_id")


def _minimum_after_add(queue: PriorityRequestQueue, request: Any, old: _Before) -> bool:
    smaller = old.head is None or _key_of(request) < _key_of(old.head)
    return queue._front() is (request if smaller else old.head)


_PRIORITY_POST: dict[str, tuple[Clause, ...]] = {
    "add_request": (
        (
            "RQ-PRI-1: the minimum is now the smaller of the old minimum and the new request",
            _minimum_after_add,
        ),
        _deep(
            "RQ-PRI-1: the queue holds the old requests and the new one, in key order",
            lambda q, r, old: _in_key_order(q, old.items, [r]),
        ),
    ),
    "pop_request": (
        (
            "RQ-PRI-2: pop returns a request no larger than any that remains",
            lambda q, r, old: not q._index or _key_of(r) < _key_of(q._front()),
        ),
        _deep(
            "RQ-PRI-2: pop takes the minimum and leaves the rest",
            lambda q, r, old: old.items is None or _same_items(q, old.items[1:]),
        ),
    ),
    "peek_request": (
        ("RQ-ALL-5: peek is the minimum", lambda q, r, old: r is q._front()),
        _deep(
            "RQ-ALL-5: peek does not change the queue",
            lambda q, r, old: _same_items(q, old.items),
        ),
    ),
    "prepend_request": (
        _deep(
            "RQ-PRI-3: prepend_request is add_request: the request takes its key's place",
            lambda q, r, old: _in_key_order(q, old.items, [r]),
        ),
    ),
    "prepend_requests": (
        (
            "RQ-PRI-4: every request of the other queue is now queued here",
            lambda q, rs, old: all(
                map(operator.is_, map(q._index.get, map(_ids_of, old.incoming)), old.incoming)
            ),
        ),
        _deep(
            "RQ-PRI-4: all of them in key order",
            lambda q, rs, old: _in_key_order(q, old.items, old.incoming),
        ),
    ),
    "remove_request": _FCFS_POST["remove_request"],
    "remove_requests": _FCFS_POST["remove_requests"],
}

#: What `PriorityRequestQueue` adds to the postcondition of each method. The structure
#: first: the other clauses read it. Even peek may drop tombstones.
_PRIORITY_CLAUSES: Mapping[str, tuple[Clause, ...]] = {
    method: _PRIORITY_STRUCTURE + clauses for method, clauses in _PRIORITY_POST.items()
}
