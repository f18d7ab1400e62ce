"""The queues' own contract checker (RQ-COST-2): where it binds, when it is off, and
how it treats a queue method called by a condition.

The seven queue operations are checked by one wrapper per method instead of
icontract's checker (see `queueref.queues.contracts`); these tests show the wrapper
keeps what icontract gave: it binds every subclass's own definition, it is off
under `python -O`, and a foreign queue's methods called by a condition do not
recurse. Expected outcomes are written out by hand.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import icontract
import pytest
from method_variants import VARIANT_CHANGES, Change, broken_class

import queueref.config
from queueref import FCFSRequestQueue, PriorityRequestQueue, Request, RequestQueue


class Foreign(RequestQueue):
    """Someone else's queue: a list, no index, and a count of the calls to peek."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.peeks = 0

    def add_request(self, request: Any) -> None:
        self.items.append(request)

    def pop_request(self) -> Any:
        if not self.items:
            raise IndexError("empty")
        return self.items.pop(0)

    def peek_request(self) -> Any:
        self.peeks += 1
        if not self.items:
            raise IndexError("empty")
        return self.items[0]

    def prepend_request(self, request: Any) -> None:
        self.items.insert(0, request)

    def prepend_requests(self, requests: RequestQueue) -> None:
        for request in requests:
            self.items.insert(0, request)

    def remove_request(self, request: Any) -> None:
        self.items.remove(request)

    def remove_requests(self, requests: Any) -> None:
        gone = {id(r) for r in requests}
        self.items = [r for r in self.items if id(r) not in gone]

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self.items))


ForeignBackPop = broken_class(
    Foreign,
    "ForeignBackPop",
    Change(
        "pop_request",
        "pops the back, not what peek returned (two levels below the ABC)",
        "return self.items.pop(0)",
        "return self.items.pop()",
    ),
)


LosingFCFS = broken_class(
    FCFSRequestQueue,
    "LosingFCFS",
    Change(
        "add_request",
        "accepts a request and never queues it (no call to the original)",
        "self._items.append(request)\n    self._index[request_id] = request",
        "pass",
    ),
)


#: Inherits the broken add unchanged.
GrandchildLosingFCFS = type("GrandchildLosingFCFS", (LosingFCFS,), {})


def foreign(cls: type[Foreign], *names: str) -> Foreign:
    queue = cls()
    queue.items.extend(Request(name) for name in names)
    return queue


@pytest.mark.parametrize("cls", [LosingFCFS, GrandchildLosingFCFS])
def test_a_subclass_that_never_calls_the_original_is_still_checked(cls: type) -> None:
    """RQ-COST-2, RQ-ALL-1: the contracts wrap the subclass's own definition (and the
    grandchild inherits the wrapped one); a keyword call is checked the same way."""
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-1: add grows the queue by one"):
        cls().add_request(Request("a"))
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-1"):
        cls().add_request(request=Request("a"))


def test_a_foreign_subclass_two_levels_down_is_checked() -> None:
    """RQ-COST-2, RQ-ALL-4: a pop that does not return what peek returned is refuted on a
    queue that is not ours and does not derive from our queues."""
    queue = foreign(ForeignBackPop, "a", "b", "c")
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-4: pop returns what peek returned"):
        queue.pop_request()


def test_a_method_called_again_during_its_own_check_runs_unchecked() -> None:
    """RQ-COST-2: the snapshot of a foreign queue reads its head through its own
    `peek_request`. Called by add's snapshot, that peek is checked, and its own snapshot's
    call of it runs unchecked (checked, it would call itself without end): two peeks per
    add, as under icontract."""
    queue = Foreign()
    queue.add_request(Request("a"))
    assert queue.peeks == 0  # an empty queue's head is known without a peek
    queue.add_request(Request("b"))
    assert queue.peeks == 2  # add's snapshot: the checked peek, and its snapshot's
    assert queue.peek_request().request_id == "a"
    assert queue.peeks == 4  # the caller's peek: its snapshot's, then the call itself


PopsAndPutsBack = broken_class(
    FCFSRequestQueue,
    "PopsAndPutsBack",
    Change(
        "prepend_requests",
        "correct itself: its body pops the other queue's front and puts it back first, so when "
        "the other queue's pop is broken, that call of the body's is what fails",
        "incoming, by_id = self._incoming(requests)",
        "requests.prepend_request(requests.pop_request())\n"
        "    incoming, by_id = self._incoming(requests)",
    ),
    label="VARIANT",
)


def test_a_queue_method_called_by_a_method_body_is_checked() -> None:
    """RQ-COST-2: only calls made by a condition skip the checks; a body's own calls of
    another queue's operations are checked as any other call."""
    queue = PopsAndPutsBack([Request("a")])
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-4"):
        queue.prepend_requests(foreign(ForeignBackPop, "x", "y"))
    queue.prepend_requests(foreign(Foreign, "x", "y"))  # a correct other queue: no error
    assert [r.request_id for r in queue] == ["y", "x", "a"]


def run_optimized(program: str) -> str:
    """The output of `program` run under `python -O`, `method_variants` importable."""
    helpers = Path(__file__).resolve().parents[1] / "helpers"
    prelude = f"import sys\nsys.path.insert(0, {str(helpers)!r})\n"
    done = subprocess.run(
        [sys.executable, "-O", "-c", prelude + textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_contracts_are_off_under_python_dash_o() -> None:
    """RQ-COST-2: under `python -O` the broken add above goes unnoticed (no contract), as
    icontract's contracts do, while the method bodies' own checks still refuse bad input
    (RQ-ALL-3)."""
    out = run_optimized(
        f"""
        from method_variants import Change, broken_class
        from queueref import FCFSRequestQueue, Request
        assert not __debug__

        LosingFCFS = broken_class(FCFSRequestQueue, "LosingFCFS", *{VARIANT_CHANGES[LosingFCFS]!r})
        LosingFCFS().add_request(Request("a"))
        print("unchecked", FCFSRequestQueue.add_request.__name__)
        queue = FCFSRequestQueue()
        queue.add_request(Request("a"))
        try:
            queue.add_request(Request("a"))
        except ValueError as error:
            print("refused", "RQ-ALL-3" in str(error), len(queue))
        """
    )
    assert out.splitlines() == ["unchecked add_request", "refused True 1"]


# The default clauses that replaced O(k) ones (RQ-COST-1): each still catches its bug with
# deep checks off, and the exact count it gave up is back under deep checks.


TwoPerRemoveMany = broken_class(
    FCFSRequestQueue,
    "TwoPerRemoveMany",
    Change(
        "remove_requests",
        "removes one request too many",
        "self._items = _without(self._items, list(present.values()))",
        "self._items = _without(self._items, list(present.values()))\n"
        "    if self._items:\n"
        "        gone = self._items.popleft()\n"
        "        del self._index[gone.request_id]",
    ),
)


RemovesNone = broken_class(
    FCFSRequestQueue,
    "RemovesNone",
    Change(
        "remove_requests",
        "removes nothing",
        "if not present:",
        "if True:",
    ),
)


ClonesIncoming = broken_class(
    PriorityRequestQueue,
    "ClonesIncoming",
    Change(
        "prepend_requests",
        "queues copies, not the requests themselves",
        "self._push(request, request_id)",
        "self._push(copy.copy(request), request_id)",
    ),
    uses={"copy": copy},
)


@pytest.fixture
def deep_off() -> Iterator[None]:
    was = queueref.config.deep_checks()
    queueref.config.set_deep_checks(False)
    try:
        yield
    finally:
        queueref.config.set_deep_checks(was)


def test_removing_more_than_named_is_refuted_without_deep_checks(deep_off: None) -> None:
    """RQ-ALL-7, RQ-COST-1: O(1) by default, from the number of requests named."""
    queue = TwoPerRemoveMany([Request("a"), Request("b"), Request("c")])
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-7: .* no more requests than"):
        queue.remove_requests([queue.peek_request()])


def test_removing_too_few_is_refuted_under_deep_checks() -> None:
    """RQ-ALL-7, RQ-COST-1: the exact count of the queued requests named is a deep check
    (tests/conftest.py turns deep checks on); without them the bug goes unnoticed."""
    assert queueref.config.deep_checks()
    queue = RemovesNone([Request("a"), Request("b")])
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-7: .* exactly the queued"):
        queue.remove_requests([queue.peek_request()])
    queueref.config.set_deep_checks(False)
    try:
        queue.remove_requests([queue.peek_request()])
    finally:
        queueref.config.set_deep_checks(True)
    assert len(queue) == 2


def test_queuing_copies_of_the_other_queue_is_refuted(deep_off: None) -> None:
    """RQ-PRI-4: the requests now queued are the other queue's own objects (read from the
    index in one C-level pass by default)."""
    queue = ClonesIncoming([Request("a", arrival_time=1.0)])
    other = PriorityRequestQueue([Request("x", arrival_time=2.0), Request("y", arrival_time=3.0)])
    with pytest.raises(icontract.ViolationError, match="RQ-PRI-4: every request of the other"):
        queue.prepend_requests(other)


# The constructor's check (RQ-COST-2): vLLM 0.30.0's scheduler makes a queue on every step,
# so `__init__`'s structure clauses are checked by the lean wrapper too, not by icontract.


CollapsingIds = broken_class(
    FCFSRequestQueue,
    "CollapsingIds",
    Change(
        "_fast_new_id",
        "every request of the constructor is indexed under one id",
        "return request_id",
        "return 'same'",
    ),
)


UnsiftedConstructor = broken_class(
    PriorityRequestQueue,
    "UnsiftedConstructor",
    Change(
        "_push",
        "the constructor's pushes append without sifting (the heap property breaks)",
        "heapq.heappush(self._heap, entry)",
        "self._heap.append(entry)",
    ),
)


@pytest.mark.contracts
def test_the_constructor_check_refutes_a_broken_index_without_deep_checks(
    deep_off: None,
) -> None:
    """RQ-IMPL-1, RQ-COST-2: the cheap half of the structure (sizes agree) after `__init__`,
    in an inherited constructor, named as icontract named it."""
    with pytest.raises(
        icontract.ViolationError,
        match=r"in CollapsingIds\.__init__:\nRQ-IMPL-1: the id index holds exactly the queued",
    ):
        CollapsingIds([Request("a"), Request("b")])
    assert len(CollapsingIds([Request("a")])) == 1  # one request: nothing collapses


@pytest.mark.contracts
def test_the_constructor_check_runs_the_deep_clauses_under_deep_checks() -> None:
    """RQ-PRI-6, RQ-COST-1: the heap property after `__init__` is a deep clause (tests/conftest.py
    turns deep checks on); without deep checks the broken constructor goes unnoticed."""
    assert queueref.config.deep_checks()
    late_first = [Request("late", arrival_time=2.0), Request("early", arrival_time=1.0)]
    with pytest.raises(icontract.ViolationError, match="RQ-PRI-6: the heap property holds"):
        UnsiftedConstructor(late_first)
    queueref.config.set_deep_checks(False)
    try:
        assert len(UnsiftedConstructor(late_first)) == 2
    finally:
        queueref.config.set_deep_checks(True)


def test_the_constructor_check_is_off_under_python_dash_o() -> None:
    """RQ-COST-2: under `python -O` the broken constructor goes unnoticed, as with icontract."""
    out = run_optimized(
        f"""
        from method_variants import Change, broken_class
        from queueref import FCFSRequestQueue, Request

        CollapsingIds = broken_class(
            FCFSRequestQueue, "CollapsingIds", *{VARIANT_CHANGES[CollapsingIds]!r}
        )

        queue = CollapsingIds([Request("a"), Request("b")])
        print("unchecked", len(queue._items), len(queue._index))
        """
    )
    assert out.splitlines() == ["unchecked 2 1"]


class CountsFronts(FCFSRequestQueue):
    """Correct; counts the reads of its front by the snapshots (the bodies make none)."""

    fronts = 0

    def _front(self) -> Any:
        CountsFronts.fronts += 1
        return super()._front()

    def _front_two(self) -> Any:
        CountsFronts.fronts += 1
        return super()._front_two()


@pytest.mark.contracts
@pytest.mark.parametrize(
    "action, reads",
    [
        (lambda q, r: q.add_request(Request("new")), 1),  # RQ-FCFS-1: the old front
        (lambda q, r: q.prepend_request(Request("new")), 1),  # RQ-FCFS-3: the old front
        (lambda q, r: q.pop_request(), 1),  # RQ-ALL-4, RQ-FCFS-2: the first two
        (lambda q, r: q.peek_request(), 0),
        (lambda q, r: q.remove_request(r), 0),
        (lambda q, r: q.remove_requests([r]), 0),
        (lambda q, r: q.prepend_requests(FCFSRequestQueue([Request("x")])), 0),
    ],
)
def test_a_snapshot_reads_the_front_only_where_a_clause_compares_it(
    deep_off: None, action: Any, reads: int
) -> None:
    """RQ-COST-2: the snapshot of our own queues reads what the method's clauses compare
    against and nothing else (counts written out by hand from the clause tables)."""
    queue = CountsFronts([Request("a"), Request("b")])
    second = list(queue)[1]
    CountsFronts.fronts = 0
    action(queue, second)
    assert CountsFronts.fronts == reads


LyingBoolFCFS = broken_class(
    FCFSRequestQueue,
    "LyingBoolFCFS",
    Change(
        "__bool__",
        "says it is empty while it holds a request",
        "return bool(self._index)",
        "return False",
    ),
)


@pytest.mark.contracts
def test_bool_is_checked_by_the_lean_wrapper_on_our_own_queues_too(deep_off: None) -> None:
    """RQ-ALL-10, RQ-COST-2: `bool` (asked at every turn of vLLM 0.30.0's scheduling loop)
    is checked on a subclass of our queues as on a foreign one."""
    assert not LyingBoolFCFS()  # empty: the lie is the truth
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-10: bool.q. is len.q. > 0"):
        bool(LyingBoolFCFS([Request("a")]))
    assert bool(FCFSRequestQueue([Request("a")])) and not PriorityRequestQueue()
