"""The strict and long variants of the queue machine (ORC-CRQ-6, ORC-SIZE-2).

`StrictQueueMachine` also makes the calls that break a precondition of the
spec; the long machines start every program with a batch of requests, drawn
as one unit (a size and a short pattern of keys) so that shrinking shortens
it by halves instead of one request at a time.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, multiple, precondition, rule

from queueref.oracle.clauses import common_clause
from queueref.oracle.handles import Handle, Outcome, call_outcome
from queueref.oracle.machine_core import stoppable
from queueref.oracle.program_text import (
    BATCH,
    batch_keys,
    batch_keys_literal,
    describe_outcome,
    expectation,
)
from queueref.oracle.rules import ARRIVAL_TIMES, PRIORITIES, QueueMachine
from queueref.request import Request

#: The longest pattern of keys a batch repeats (ORC-SIZE-2).
MAX_BATCH_PATTERN = 4


class StrictQueueMachine(QueueMachine):
    """QueueMachine plus the calls that break a precondition of the spec (ORC-CRQ-6).

    A request queued twice (RQ-ALL-2), a different request with a taken id
    (RQ-ALL-3), an object that is no request (RQ-REQ-3), a queue prepended to
    itself or sharing a request (RQ-ALL-8): the subject must raise what the
    expected side raises, and change nothing.
    """

    strict = True

    @precondition(lambda self: bool(self.ledger))
    @rule(
        target=QueueMachine.requests,
        data=st.data(),
        priority=PRIORITIES,
        arrival_time=ARRIVAL_TIMES,
        method=st.sampled_from(["add_request", "prepend_request"]),
    )
    @stoppable(returns_requests=True)
    def add_request_with_taken_id(
        self, data: st.DataObject, priority: int, arrival_time: float, method: str
    ) -> Handle:
        """RQ-ALL-3: a different request whose id is queued is rejected with ValueError."""
        queued = data.draw(st.sampled_from(self.ledger), label="queued")
        twin = self.new_request(priority, arrival_time, request_id=queued.request_id)
        self.insert(method, twin)
        return twin

    @rule(method=st.sampled_from(["add_request", "prepend_request"]))
    @stoppable(returns_requests=False)
    def add_non_request(self, method: str) -> None:
        """RQ-REQ-3: an object without the request fields is rejected with TypeError."""
        e = self.e
        self.step(
            f"q.{method}('r0')",
            lambda: getattr(self.q, method)("r0"),
            None if e is None else lambda: getattr(e, method)("r0"),
            Outcome(error="TypeError"),
            operation=method,
            clause="RQ-REQ-3",
        )

    @rule()
    @stoppable(returns_requests=False)
    def prepend_requests_to_itself(self) -> None:
        """RQ-ALL-8: a queue prepended to itself is rejected with ValueError."""
        e = self.e
        self.step(
            "q.prepend_requests(q)",
            lambda: self.q.prepend_requests(self.q),
            None if e is None else lambda: e.prepend_requests(e),
            Outcome(error="ValueError"),
            operation="prepend_requests",
            clause="RQ-ALL-8",
        )


def _add_batch(self: QueueMachine, data: st.DataObject) -> Any:
    """ORC-SIZE-2: start the program with a batch of `initial_requests` requests.

    The batch is the list `b` (ids 'b0', 'b1', ...), added in order by
    `add_request`; the program writes it as one list and one loop. It is
    drawn as one unit: a size, and a pattern of at most MAX_BATCH_PATTERN
    keys that the batch repeats; Hypothesis shrinks an integer and a short
    list, not hundreds of keys one by one (ORC-SIZE-4).
    """
    low, high = self.initial_requests
    size = data.draw(st.integers(min_value=low, max_value=high), label="batch size")
    if not size:
        return multiple()
    pattern = data.draw(
        st.lists(st.tuples(PRIORITIES, ARRIVAL_TIMES), min_size=1, max_size=MAX_BATCH_PATTERN),
        label="batch keys",
    )
    if self.request_name == "Request" and self.request_factory is Request:
        make = f"Request(f'{BATCH}{{i}}', priority=p, arrival_time=t)"
    else:
        make = f"{self.request_name}(f'{BATCH}{{i}}', p, t)"
    creation = f"{BATCH} = [{make} for i, (p, t) in enumerate({batch_keys_literal(pattern, size)})]"
    handles = [
        self.handle(
            f"{BATCH}[{index}]",
            f"{BATCH}{index}",
            priority,
            arrival_time,
            lambda made: f"{creation}  # FAILS: raises {made.error}: {made.detail}",
            batch_index=index,
        )
        for index, (priority, arrival_time) in enumerate(batch_keys(pattern, size))
    ]
    self.record(creation)
    e = self.e
    for index, handle in enumerate(handles):
        self.spend()
        actual = call_outcome(partial(self.q.add_request, handle.subject))
        expected = Outcome() if e is None else call_outcome(partial(e.add_request, handle.expected))
        if actual.error != expected.error:
            loop = [f"for request in {BATCH}[:{index}]:", "    q.add_request(request)"]
            failing = expectation(f"q.add_request({handle.name})", "none", expected)
            failing[0] += f"  # FAILS: {describe_outcome(actual, 'none')}"
            self.fail_call(
                f"q.add_request({handle.name}) {describe_outcome(actual, 'none')}",
                [*(loop if index else []), *failing],
                "add_request",
                common_clause(self.policy, "add_request"),
            )
        self.ledger.append(handle)
    self.record(f"for request in {BATCH}:")
    self.record("    q.add_request(request)")
    self.last_call = f"adding the {len(handles)} requests of {BATCH}"
    self.last_operation = "add_request"
    return multiple(*handles)


_starting_batch = initialize(target=QueueMachine.requests, data=st.data())(
    stoppable(returns_requests=True)(_add_batch)
)


class LongQueueMachine(QueueMachine):
    """QueueMachine whose programs start with a batch of requests (ORC-SIZE-2)."""

    add_batch = _starting_batch


class StrictLongQueueMachine(StrictQueueMachine):
    """StrictQueueMachine whose programs start with a batch of requests (ORC-SIZE-2)."""

    add_batch = _starting_batch
