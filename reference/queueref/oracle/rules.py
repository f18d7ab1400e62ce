"""The rules of the queue machine: which calls a program makes, and what is checked after each.

`QueueMachine` is a Hypothesis state machine: each rule makes one call of
`RequestQueue` on both sides (through `MachineCore.step`), and after every
step `check_queue` compares the whole contents and checks the laws
(ORC-MACH-1). The clause each comparison names is in
`queueref.oracle.clauses` (ORC-CLAUSE-1).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, invariant, multiple, rule

from queueref.oracle.clauses import common_clause, effect_clause, law_or, length_clause
from queueref.oracle.handles import Handle, Outcome, call_outcome, request_id_for
from queueref.oracle.machine_core import MachineCore, stoppable
from queueref.oracle.program_text import describe_outcome, render

#: Few distinct values, so that keys tie often and ids decide (RQ-REQ-1).
PRIORITIES = st.integers(min_value=-1, max_value=1)
ARRIVAL_TIMES = st.sampled_from([0.0, 1.0, 2.0])
#: ORC-TIES-3: whether a new request's id sorts before the ids made so far ('r03').
SORTS_FIRST = st.booleans()


class QueueMachine(MachineCore):
    """Drive a subject queue and an expected queue side by side (ORC-MACH-1).

    :param subject_factory: builds an empty queue under test (called for `q`
        and for every other queue handed to `prepend_requests`).
    :param expected_factory: builds an empty queue with the expected
        behaviour, or None to check only the policy-independent laws.
    :param request_factory: `request_factory(request_id, priority, arrival_time)`
        builds the requests given to the subject (default `queueref.Request`).
    :param policy: the policy the expected side follows, which decides the
        clause each failure names (ORC-CLAUSE-1); by default read from the
        expected queue (its `policy`, or its class); None without one.
    :param ties: "any" accepts any order among requests with equal
        (priority, arrival_time) in a priority queue (ORC-TIES-1).
    :param known: failures, by (operation, clause), found before: a program
        that meets one stops there, unreported (ORC-MANY-1).
    :param initial_requests: (low, high): `LongQueueMachine` starts every
        program by adding a batch of between low and high requests (ORC-SIZE-2).
    :param meter: counts the calls of a check and ends a round whose budget
        is spent (ORC-SIZE-4); None: no limit.

    `StrictQueueMachine` also makes the calls that break a precondition of
    the spec and requires the subject to reject them as the expected side does.
    """

    requests = Bundle("requests")

    # ------------------------------------------------------------------
    # Rules: adding

    @rule(target=requests, priority=PRIORITIES, arrival_time=ARRIVAL_TIMES, early=SORTS_FIRST)
    @stoppable(returns_requests=True)
    def add_request(self, priority: int, arrival_time: float, early: bool) -> Handle:
        """RQ-ALL-1, RQ-FCFS-1, RQ-PRI-1: add a new request."""
        handle = self.new_request(priority, arrival_time, self._next_id(early))
        self.insert("add_request", handle)
        return handle

    @rule(target=requests, priority=PRIORITIES, arrival_time=ARRIVAL_TIMES, early=SORTS_FIRST)
    @stoppable(returns_requests=True)
    def prepend_request(self, priority: int, arrival_time: float, early: bool) -> Handle:
        """RQ-ALL-1, RQ-FCFS-3, RQ-PRI-3: prepend a new request."""
        handle = self.new_request(priority, arrival_time, self._next_id(early))
        self.insert("prepend_request", handle)
        return handle

    def _next_id(self, early: bool) -> str:
        """ORC-TIES-3: the id of the next request: its name, or one that sorts first."""
        return request_id_for(f"r{len(self.handles) + 1}", early)

    @rule(request=requests, method=st.sampled_from(["add_request", "prepend_request"]))
    @stoppable(returns_requests=False)
    def add_request_again(self, request: Handle, method: str) -> None:
        """RQ-ALL-1 for a request seen before (popped, removed); RQ-ALL-2 when it is queued."""
        if self.conflict(request) is not None and not self.strict:
            return  # a precondition violation: only made in strict mode
        self.insert(method, request)

    @rule(
        target=requests,
        members=st.lists(
            st.one_of(requests, st.tuples(PRIORITIES, ARRIVAL_TIMES, SORTS_FIRST)),
            min_size=0,
            max_size=3,
        ),
    )
    @stoppable(returns_requests=True)
    def prepend_requests(self, members: list[Handle | tuple[int, float, bool]]) -> Any:
        """RQ-ALL-8, RQ-FCFS-4, RQ-PRI-4: prepend another queue (new and old requests)."""
        self.others += 1
        name = f"other{self.others}"
        other = self.make_queue(name)
        other_e = self.expected_factory() if self.expected_factory is not None else None
        chosen: list[Handle] = []
        new: list[Handle] = []
        for member in members:
            if isinstance(member, tuple):
                priority, arrival_time, early = member
                handle = self.new_request(priority, arrival_time, self._next_id(early))
                new.append(handle)
            else:
                handle = member
                if any(h is handle or h.request_id == handle.request_id for h in chosen):
                    continue
                if self.conflict(handle) is not None and not self.strict:
                    continue
            chosen.append(handle)
            self.step(
                f"{name}.add_request({handle.name})",
                partial(other.add_request, handle.subject),
                None if other_e is None else partial(other_e.add_request, handle.expected),
                Outcome(),
                operation="add_request",
                clause=common_clause(self.policy, "add_request"),
            )
        incoming = self.stable_contents(name, other)
        if other_e is not None:
            self.step(
                f"list({name})",
                lambda: list(other),
                lambda: list(other_e),
                Outcome(value=incoming),
                "value",
                operation="iter",
                clause=effect_clause(self.policy, "iter"),
            )
        conflict = any(self.conflict(handle) is not None for handle in chosen)
        e = self.e
        self.step(
            f"q.prepend_requests({name})",
            lambda: self.q.prepend_requests(other),
            None if e is None else lambda: e.prepend_requests(other_e),
            Outcome(error="ValueError") if conflict else Outcome(),
            operation="prepend_requests",
            clause=common_clause(self.policy, "prepend_requests"),
        )
        if not conflict:
            self.ledger.extend(chosen)
        left = self.contents(name, other)
        if left != incoming:
            self.fail_law(
                f"q.prepend_requests({name}) changed {name}",
                [
                    f"assert list({name}) == {render(incoming)}"
                    f"  # FAILS: RQ-ALL-8: {name} was left as {render(left)}"
                ],
                "prepend_requests",
                common_clause(self.policy, "prepend_requests"),
            )
        return multiple(*new)

    # ------------------------------------------------------------------
    # Rules: taking out

    @rule()
    @stoppable(returns_requests=False)
    def pop_request(self) -> None:
        """RQ-ALL-4, RQ-FCFS-2, RQ-PRI-2 (ORC-LAW-1): pop; empty -> IndexError."""
        e = self.e
        empty = not self.ledger
        actual, expected = self.step(
            "q.pop_request()",
            self.q.pop_request,
            None if e is None else e.pop_request,
            self.head(),
            "request",
            operation="pop_request",
            clause="RQ-ALL-4" if empty else effect_clause(self.policy, "pop_request"),
        )
        if actual.error is not None:
            return
        popped = actual.value
        if e is not None and popped is not expected.value:
            # ORC-TIES-1: the subject took another of the tied requests; so does e.
            e.remove_request(popped.expected)
            e.add_request(expected.value.expected)
        self.ledger = [h for h in self.ledger if h is not popped]
        after = self.contents()
        if after != self.last[1:]:
            self.fail_law(
                "after pop_request() the queue is not the rest of its iteration",
                [
                    f"assert list(q) == {render(self.last[1:])}"
                    f"  # FAILS: RQ-ALL-9: the queue holds {render(after)}"
                ],
                "pop_request",
                common_clause(self.policy, "iter"),
            )

    @rule()
    @stoppable(returns_requests=False)
    def peek_request(self) -> None:
        """RQ-ALL-5 (ORC-LAW-1): peek; empty -> IndexError."""
        e = self.e
        empty = not self.ledger
        self.step(
            "q.peek_request()",
            self.q.peek_request,
            None if e is None else e.peek_request,
            self.head(),
            "request",
            operation="peek_request",
            clause="RQ-ALL-5" if empty else law_or(self.policy, "RQ-ALL-5", "ORC-LAW-1"),
        )
        after = self.contents()
        if after != self.last:
            self.fail_law(
                "peek_request() changed the queue",
                [
                    f"assert list(q) == {render(self.last)}"
                    f"  # FAILS: RQ-ALL-5: after the peek the queue holds {render(after)}"
                ],
                "peek_request",
                common_clause(self.policy, "peek_request"),
            )

    @rule(request=requests)
    @stoppable(returns_requests=False)
    def remove_request(self, request: Handle) -> None:
        """RQ-ALL-6 (ORC-LAW-5): remove a queued request; an absent one -> ValueError."""
        present = any(h is request for h in self.ledger)
        e = self.e
        self.step(
            f"q.remove_request({request.name})",
            lambda: self.q.remove_request(request.subject),
            None if e is None else lambda: e.remove_request(request.expected),
            Outcome() if present else Outcome(error="ValueError"),
            operation="remove_request",
            clause=common_clause(self.policy, "remove_request"),
        )
        if present:
            self.ledger = [h for h in self.ledger if h is not request]

    @rule(named=st.lists(requests, max_size=4), as_iterator=st.booleans())
    @stoppable(returns_requests=False)
    def remove_requests(self, named: list[Handle], as_iterator: bool) -> None:
        """RQ-ALL-7 (ORC-LAW-5): remove the queued ones among present, absent and repeated."""
        listed = "[" + ", ".join(h.name for h in named) + "]"
        argument = f"iter({listed})" if as_iterator else listed

        def wrap(items: list[Any]) -> Iterable[Any]:
            return iter(items) if as_iterator else items

        e = self.e
        self.step(
            f"q.remove_requests({argument})",
            lambda: self.q.remove_requests(wrap([h.subject for h in named])),
            None if e is None else lambda: e.remove_requests(wrap([h.expected for h in named])),
            Outcome(),
            operation="remove_requests",
            clause=common_clause(self.policy, "remove_requests"),
        )
        self.ledger = [h for h in self.ledger if all(h is not x for x in named)]

    # ------------------------------------------------------------------
    # Rules: looking

    @rule()
    @stoppable(returns_requests=False)
    def iterate(self) -> None:
        """RQ-ALL-9, RQ-FCFS-5, RQ-PRI-5 (ORC-LAW-2): iterate."""
        e = self.e
        self.step(
            "list(q)",
            lambda: list(self.q),
            None if e is None else lambda: list(e),
            Outcome(value=self.last),
            "value",
            operation="iter",
            clause=effect_clause(self.policy, "iter"),
        )

    @rule()
    @stoppable(returns_requests=False)
    def length(self) -> None:
        """ORC-LAW-3 (in both checkers): len."""
        e = self.e
        self.step(
            "len(q)",
            lambda: len(self.q),
            None if e is None else lambda: len(e),
            Outcome(value=len(self.ledger)),
            "value",
            operation="len",
            clause=length_clause(self.policy, self.last_operation),
        )

    @rule()
    @stoppable(returns_requests=False)
    def truth(self) -> None:
        """RQ-ALL-10 (in both checkers): bool."""
        e = self.e
        self.step(
            "bool(q)",
            lambda: bool(self.q),
            None if e is None else lambda: bool(e),
            Outcome(value=bool(self.ledger)),
            "value",
            operation="bool",
            clause=common_clause(self.policy, "bool"),
        )

    # ------------------------------------------------------------------
    # After every step

    @invariant()
    @stoppable(returns_requests=False)
    def check_queue(self) -> None:
        """Compare the whole contents and check the laws after every step.

        RQ-ALL-9: iterating twice gives the same, so iteration does not
        change the queue; the contents equal the expected side's
        (RQ-FCFS-1..5, RQ-PRI-1..5; with ties="any" up to the order of ties,
        ORC-TIES-1) or, without one, hold exactly the requests that must be
        queued, each once (ORC-LAW-4); `len` agrees with the iteration
        (ORC-LAW-3) and `bool` with `len` (RQ-ALL-10). (The peek and pop
        rules check ORC-LAW-1 and RQ-ALL-9 against the contents checked
        here.) A contents failure names the clause of the last operation
        (ORC-CLAUSE-1); the others name the same clause in both checkers.
        """
        first = self.stable_contents()
        expected = self.expected_contents()
        operation = self.last_operation
        after = f" after {self.last_call}" if self.last_call else ""
        if self.e is not None:
            if not self.same(first, expected):
                self.note_parting(first, expected)
                self.fail_law(
                    f"the contents differ{after}",
                    [
                        f"assert list(q) == {render(expected)}"
                        f"  # FAILS: the queue holds {render(first)}"
                    ],
                    operation,
                    effect_clause(self.policy, operation),
                )
        elif sorted(map(id, first)) != sorted(map(id, expected)):
            wanted = sorted(h.request_id for h in expected)
            held = [h.request_id if isinstance(h, Handle) else render(h) for h in first]
            self.fail_law(
                f"requests were lost, duplicated or invented{after}",
                [
                    f"assert sorted(r.request_id for r in q) == {wanted!r}"
                    f"  # FAILS: the queue holds {sorted(held)!r}"
                ],
                operation,
                "ORC-LAW-4",
            )
        self.last = first
        length = call_outcome(lambda: len(self.q))
        if length.error is not None or length.value != len(first):
            self.fail_law(
                f"len(q) disagrees with the iteration{after}",
                [f"assert len(q) == {len(first)}  # FAILS: {describe_outcome(length, 'value')}"],
                operation,
                length_clause(self.policy, operation),
            )
        truth = call_outcome(lambda: bool(self.q))
        if truth.error is not None or truth.value != (len(first) > 0):
            statement = "assert q" if first else "assert not q"
            self.fail_law(
                f"bool(q) disagrees with len(q){after}",
                [f"{statement}  # FAILS: bool(q) {describe_outcome(truth, 'value')}"],
                operation,
                common_clause(self.policy, "bool"),
            )
