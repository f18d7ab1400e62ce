"""RQ-REQ-2, RQ-REQ-3: what a queue does never depends on a request's `==`, `<` or `hash`.

RQ-REQ-3 lets a queue hold any object with the three fields, and RQ-REQ-2 makes
it remove the object named, by identity. So a request type whose `==` lies
(every request equal to every other), whose `==` and `<` raise, or which cannot
be hashed (a plain `@dataclass`) must be queued, ordered and removed exactly as
`Request`. Seeded random operations (`tests/helpers/queue_operations.py`) run on a
queue of such requests and on a queue of `Request`s with the same fields, and
the two must hand out the same ids in the same order after every operation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest
from method_variants import Change, broken_class
from queue_operations import ids, operations

from queueref import FCFSRequestQueue, PriorityRequestQueue, Request, RequestQueue


class Liar:
    """Equal to everything and less than everything."""

    def __init__(self, request_id: str, priority: int, arrival_time: float) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, priority, arrival_time

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __lt__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class Raiser(Liar):
    """Refuses to be compared."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("a queue compared two requests with ==")

    def __ne__(self, other: object) -> bool:
        raise AssertionError("a queue compared two requests with !=")

    def __lt__(self, other: object) -> bool:
        raise AssertionError("a queue compared two requests with <")

    __hash__ = object.__hash__


@dataclass
class Unhashable:
    """A plain dataclass: `==` by fields, no hash."""

    request_id: str
    priority: int
    arrival_time: float


def run(queue: RequestQueue, kind: type, requests: dict[str, Any], op: tuple[Any, ...]) -> str:
    """`op` on `queue`, its requests made of `kind`; what it returned or raised."""
    name, *rids = op
    for rid in rids:
        if rid not in requests:
            made = len(requests)
            priority, arrival = (len(rid) % 3, float(made)) if rid[0] == "r" else (1, -float(made))
            requests[rid] = kind(rid, priority, arrival)
    try:
        if name in ("add_request", "prepend_request", "remove_request"):
            getattr(queue, name)(requests[rids[0]])
        elif name == "pop_request":
            return f"popped {queue.pop_request().request_id}"
        elif name == "remove_requests":
            queue.remove_requests([requests[r] for r in rids])
        else:
            other = type(queue)()
            for rid in rids:
                other.add_request(requests[rid])
            queue.prepend_requests(other)
        return "ok"
    except Exception as error:
        return f"{type(error).__name__}"


def assert_queued_as_request(queue_type: type, kind: type) -> None:
    """60 seeded programs on a queue of `kind` requests and on one of `Request`s: the
    same answers and the same ids in the same order after every operation."""
    for seed in range(60):
        rng = random.Random(f"{queue_type.__name__}-{kind.__name__}-{seed}")
        honest, odd = queue_type(), queue_type()
        honest_requests: dict[str, Any] = {}
        odd_requests: dict[str, Any] = {}
        for op in operations(rng, 40):
            said = run(honest, Request, honest_requests, op)
            assert run(odd, kind, odd_requests, op) == said, (seed, op)
            assert ids(odd) == ids(honest), (seed, op)


@pytest.mark.parametrize("kind", [Liar, Raiser, Unhashable])
@pytest.mark.parametrize("queue_type", [FCFSRequestQueue, PriorityRequestQueue])
def test_rq_req_2_a_request_type_that_lies_or_raises_is_queued_as_request(
    queue_type: type, kind: type
) -> None:
    assert_queued_as_request(queue_type, kind)


def test_rq_req_2_removal_that_trusts_the_request_s_equality_is_caught() -> None:
    """The planted bug: `_remove_object` accepts the first request `==` the one named.
    With `Liar` requests it removes the front instead, and the comparison sees it."""
    broken = broken_class(
        FCFSRequestQueue,
        "TrustsEquality",
        Change(
            "_remove_object",
            "trusts the request type's ==",
            "items[position] is not request",
            "items[position] != request",
        ),
    )
    honest, odd = FCFSRequestQueue(), broken()
    honest_requests: dict[str, Any] = {}
    odd_requests: dict[str, Any] = {}
    for op in [("add_request", "r0"), ("add_request", "r1"), ("remove_request", "r1")]:
        run(honest, Request, honest_requests, op)
        run(odd, Liar, odd_requests, op)
    assert ids(honest) == ["r0"]
    assert ids(odd) == ["r1"]  # the front went: the named request stayed


class Shifty(Liar):
    """Equal only to itself, but a new hash at every call: a set never finds it again."""

    _hashes = iter(range(1, 1 << 62))

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return next(Shifty._hashes)


@pytest.mark.parametrize(
    ("queued", "named"),
    [
        # One of three found by the set pass: 5 kept where 3 should be (6 ^ 3 == 5).
        (["r0", "r1", "r2", "s0", "s1", "s2"], ["r0", "s0", "s1"]),
        # None found: all 3 kept where 1 should be (3 | 2 == 3).
        (["s0", "s1", "s2"], ["s0", "s1"]),
    ],
)
def test_rq_req_2_remove_requests_of_a_request_whose_hash_changes_removes_the_objects_named(
    queued: list[str], named: list[str]
) -> None:
    """RQ-REQ-2 with a hash that lies: `remove_requests` may not trust a set lookup that
    misses a named request (its hash changed); the queue drops exactly the named ones."""
    requests: dict[str, Any] = {
        rid: (Request if rid[0] == "r" else Shifty)(rid, 0, float(number))
        for number, rid in enumerate(queued)
    }
    queue = FCFSRequestQueue()
    for rid in queued:
        queue.add_request(requests[rid])
    queue.remove_requests([requests[rid] for rid in named])
    left = [rid for rid in queued if rid not in named]
    assert ids(queue) == left
    assert len(queue) == len(left)
    assert all(requests[rid] in queue for rid in left)


class HashRaiser(Liar):
    """Equal only to itself; asking its hash raises (not a TypeError)."""

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        raise AssertionError("a queue hashed a request")


class LyingShifty(Liar):
    """Equal to everything, and a new hash at every call: a miss and a wrong match can
    cancel out in a count."""

    def __hash__(self) -> int:
        return next(Shifty._hashes)


@pytest.mark.parametrize("kind", [HashRaiser, LyingShifty])
@pytest.mark.parametrize("queue_type", [FCFSRequestQueue, PriorityRequestQueue])
def test_rq_req_2_a_request_whose_hash_raises_or_shifts_is_queued_as_request(
    queue_type: type, kind: type
) -> None:
    assert_queued_as_request(queue_type, kind)


class Chameleon(Liar):
    """Equal to everything; its hash is `first` at the first call and `later` after: a
    named one the set pass misses, and another taken in its place, cancel out in a count."""

    def __init__(self, request_id: str, first: int, later: int) -> None:
        super().__init__(request_id, 0, 0.0)
        self._hashes = iter([first])
        self._later = later

    def __hash__(self) -> int:
        return next(self._hashes, self._later)


def test_rq_req_2_remove_requests_is_not_fooled_by_a_miss_and_a_wrong_match() -> None:
    """RQ-REQ-2: the set pass counts on every named request being found; a named request
    whose hash changes is missed while a queued one that claims to equal it is taken, so
    the count comes out right on the wrong objects. The named ones go, and no other."""
    named = Chameleon("named", first=7, later=8)  # 7 in the set, 8 in the pass: missed
    other = Chameleon("other", first=7, later=7)  # 7 in the pass, and == the named one
    plain = Request("plain")
    queue = FCFSRequestQueue()
    for request in (other, named, plain):
        queue.add_request(request)
    queue.remove_requests([named, plain])
    assert [r.request_id for r in queue] == ["other"]


@pytest.mark.parametrize("error", [AssertionError, KeyError])
def test_rq_req_2_a_queued_request_whose_hash_raises_does_not_stop_removing_others(
    error: type[Exception],
) -> None:
    """RQ-REQ-2: removing `Request`s from a queue that also holds a request whose hash
    raises (any error, not only a TypeError) removes exactly them, and raises nothing."""

    class Raises(Liar):
        def __hash__(self) -> int:
            raise error("a queue hashed a request")

    odd = Raises("odd", 0, 0.0)
    first, second = Request("first"), Request("second")
    queue = FCFSRequestQueue()
    for request in (first, odd, second):
        queue.add_request(request)
    queue.remove_requests([first, second])
    assert [r.request_id for r in queue] == ["odd"]


class Mimic(Liar):
    """Equal to everything, and hashed as the request it copies: a set of requests that
    holds that one takes a mimic for it."""

    def __init__(self, request_id: str, copies: object) -> None:
        super().__init__(request_id, 0, 0.0)
        self._hash = object.__hash__(copies)

    def __hash__(self) -> int:
        return self._hash


@pytest.mark.parametrize(
    ("size", "named", "mimics"),
    # One queue size, named count and number of mimics per way to miscount what is kept:
    # size - named - mimics is what the set pass keeps, (7 & 2), (6 // 2), (5 % 2), (6 >> 2).
    [(7, 2, 3), (6, 2, 1), (5, 2, 2), (6, 2, 3)],
)
def test_rq_req_2_remove_requests_takes_no_queued_request_that_claims_to_be_a_named_one(
    size: int, named: int, mimics: int
) -> None:
    """RQ-REQ-2: removing `Request`s from a queue that also holds requests hashed as one
    of them and equal to everything removes the named ones and no mimic: the set pass
    takes the mimics too, keeps too few, and the pass over ids decides."""
    requests: list[Any] = [Request(f"r{i}") for i in range(size - mimics)]
    chosen = requests[:named]
    requests += [Mimic(f"m{i}", chosen[0]) for i in range(mimics)]
    queue = FCFSRequestQueue()
    for request in requests:
        queue.add_request(request)
    queue.remove_requests(chosen)
    assert [r.request_id for r in queue] == [r.request_id for r in requests[named:]]


class HashShifts:
    """Compares by identity (object's own `==`), but hashed `first` once and `later` after."""

    def __init__(self, request_id: str, first: int, later: int) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, 0, 0.0
        self._hashes = iter([first])
        self._later = later

    def __hash__(self) -> int:
        return next(self._hashes, self._later)


@pytest.mark.parametrize("with_plain", [False, True])
def test_rq_req_2_a_named_request_whose_hash_shifts_is_removed_though_its_eq_is_object_s(
    with_plain: bool,
) -> None:
    """RQ-REQ-2: a type that keeps object's `==` but not object's hash is not trusted to
    be found by a set: a named one (hashed 7, then 8) is missed there while a queued
    mimic hashed 7 is taken, which a count cannot see. The named ones go, and no other,
    whether or not a `Request` is named beside them."""
    named: list[Any] = [HashShifts("shifts", first=7, later=8)]
    named.append(Request("plain") if with_plain else HashShifts("steady", first=9, later=9))
    other = Chameleon("other", first=7, later=7)
    queue = FCFSRequestQueue()
    for request in [other, *named]:
        queue.add_request(request)
    queue.remove_requests(named)
    assert [r.request_id for r in queue] == ["other"]
