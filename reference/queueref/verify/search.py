"""The exhaustive search of the admission models: worst cases, witnesses, leaks.

Breadth first, from the initial state of a model of `queueref.verify.admission_models`:
`search` keeps every reachable state (and, on demand, a parent of each, so a shortest
witness), `explore` is one row of the bound table, `worst_spurious_rejection` the price
of write-then-check's hard cap, `capacity_leak` the crash model's lost capacity.
`replay` re-checks a kept trace. `queueref.verify.search` names all of them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from queueref.admission.protocol import Protocol, overshoot_bound
from queueref.admission.protocol import bound as protocol_bound
from queueref.verify.admission_models import (
    CHECK_THEN_WRITE,
    PROTOCOLS,
    WRITE_THEN_CHECK,
    CheckThenWrite,
    CompactCheckThenWrite,
    Model,
    RawStep,
    State,
    StateLimitExceeded,
    Step,
    WriteThenCheck,
)
from queueref.verify.broken_models import Crash
from queueref.verify.promela import spin_worst_total


@dataclass(frozen=True)
class Exploration:
    """The result of one exhaustive search."""

    # OB-TABLE-1: one row of the exhaustive bound table.

    protocol: str
    servers: int
    cap: int
    weight: int
    worst_total: int
    bound: int
    states: int
    seconds: float
    witness: tuple[Step, ...] | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def row(self) -> dict[str, object]:
        """The JSON row of `queueref bound-table` and `build/bound-table.json`."""
        row: dict[str, object] = {
            "protocol": self.protocol,
            "servers": self.servers,
            "cap": self.cap,
            "weight": self.weight,
            "worst_total": self.worst_total,
            "bound": self.bound,
            "states": self.states,
            "seconds": round(self.seconds, 3),
        }
        row.update(self.extra)
        if self.witness is not None:
            row["witness"] = [s.to_json() for s in self.witness]
        return row


@dataclass
class Search:
    """Every reachable state of a model, with the best one for a score."""

    states: int
    best_score: int
    best_state: State
    parents: dict[State, tuple[State, RawStep] | None] | None
    #: The best value of each of the `also` scores of `search`.
    also: tuple[int, ...] = ()

    def path(self, target: State | None = None) -> tuple[Step, ...]:
        """A shortest sequence of steps from the initial state to `target` (the best)."""
        assert self.parents is not None, "search without parents: no witness"
        state = self.best_state if target is None else target
        steps: list[Step] = []
        while True:
            link = self.parents[state]
            if link is None:
                break
            state, raw = link
            steps.append(Step(*raw))
        steps.reverse()
        return tuple(steps)


def search(
    model: Model,
    score: Callable[[State], int] | None = None,
    *,
    parents: bool = False,
    also: Sequence[Callable[[State], int]] = (),
    max_states: int | None = None,
) -> Search:
    """Breadth-first search of every state reachable from `model.initial()`.

    `score` defaults to `model.total`; the first state found with the highest score is
    kept, so its path (with `parents=True`) is a shortest witness. The best values of the
    `also` scores are computed in the same pass. Past `max_states` states it raises
    `StateLimitExceeded` instead of filling the memory.
    """
    score_of = model.total if score is None else score
    start = model.initial()
    parent_map: dict[State, tuple[State, RawStep] | None] = {start: None}
    seen: set[State] | dict[State, tuple[State, RawStep] | None] = (
        parent_map if parents else {start}
    )
    best_state, best_score = start, score_of(start)
    best_also = [f(start) for f in also]
    frontier = [start]
    successors = model.successors
    while frontier:
        nxt: list[State] = []
        for state in frontier:
            for label, new in successors(state):
                if new in seen:
                    continue
                if parents:
                    parent_map[new] = (state, label)
                else:
                    assert isinstance(seen, set)
                    seen.add(new)
                nxt.append(new)
                value = score_of(new)
                if value > best_score:
                    best_state, best_score = new, value
                for i, f in enumerate(also):
                    value = f(new)
                    if value > best_also[i]:
                        best_also[i] = value
        if max_states is not None and len(seen) > max_states:
            raise StateLimitExceeded(f"more than {max_states} states")
        frontier = nxt
    return Search(
        len(seen), best_score, best_state, parent_map if parents else None, tuple(best_also)
    )


_S = TypeVar("_S")


def reachable(
    start: _S,
    successors: Callable[[_S], Iterable[_S]],
    *,
    max_states: int | None = None,
    too_many: str = "",
) -> Iterator[_S]:
    """Every state reachable from `start` through `successors`, each once, breadth first.

    For the small models that keep their own state shape (`queueref.verify.lease`,
    `queueref.verify.tokens`). Past `max_states` states it raises `ValueError(too_many)`.
    """
    seen = {start}
    frontier = deque([start])
    while frontier:
        state = frontier.popleft()
        yield state
        for nxt in successors(state):
            if nxt not in seen:
                seen.add(nxt)
                if max_states is not None and len(seen) > max_states:
                    raise ValueError(too_many)
                frontier.append(nxt)


def least_costs(
    start: _S,
    successors: Callable[[_S], Iterable[tuple[_S, int]]],
    *,
    max_states: int | None = None,
    too_many: str = "",
) -> dict[_S, int]:
    """Every state reachable from `start`, with the least total cost of a path to it.

    `successors` gives (state, cost of the step) pairs, costs ints >= 0: Dijkstra's search
    over buckets of equal cost. For a model whose ghost only grows along a path and whose
    moves do not depend on it (`queueref.verify.lease`): the state without the ghost, the
    least ghost reaching it. Past `max_states` states it raises `ValueError(too_many)`.
    """
    # OB-LEASE-2: the least ghost over every path, so no excess is hidden.
    best = {start: 0}
    buckets: dict[int, list[_S]] = {0: [start]}
    while buckets:
        cost = min(buckets)
        todo = buckets.pop(cost)
        while todo:
            state = todo.pop()
            if best[state] != cost:
                continue  # reached more cheaply since it was queued
            for nxt, step in successors(state):
                if step < 0:
                    raise ValueError(f"a step of negative cost {step}")
                total = cost + step
                known = best.get(nxt)
                if known is not None and known <= total:
                    continue
                best[nxt] = total
                if known is None and max_states is not None and len(best) > max_states:
                    raise ValueError(too_many)
                (todo if step == 0 else buckets.setdefault(total, [])).append(nxt)
    return best


def replay(model: Model, steps: Sequence[Step]) -> list[State]:
    """The states visited by `steps` from the initial state (`ValueError` on a step that
    is not enabled): how a kept counterexample trace is re-checked."""
    states = [model.initial()]
    for step in steps:
        states.append(model.step(states[-1], step))
    return states


#: The encodings of check-then-write: the reference (weight chosen at `start`) and the
#: compact one (weight chosen at the decision, saturated views, packed search).
ENCODINGS: tuple[str, ...] = ("reference", "compact")
#: Who searches: this module, or Spin on the compact encoding's Promela text (OB-TABLE-3).
ENGINES: tuple[str, ...] = ("python", "spin")


def make_model(
    protocol: str, servers: int, cap: int, weight: int, *, encoding: str = "reference"
) -> Model:
    """The model of `protocol` ("check-then-write" or "write-then-check")."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")
    if protocol == CHECK_THEN_WRITE:
        if encoding == "compact":
            return CompactCheckThenWrite(servers, cap, weight)
        return CheckThenWrite(servers, cap, weight)
    if encoding == "compact":
        raise ValueError("the compact encoding is of check-then-write only")
    if protocol == WRITE_THEN_CHECK:
        return WriteThenCheck(servers, cap, weight)
    raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")


def explore(
    protocol: str,
    servers: int,
    cap: int,
    weight: int,
    *,
    witness: bool = False,
    spurious: bool = True,
    max_states: int | None = None,
    encoding: str = "reference",
    engine: str = "python",
) -> Exploration:
    """The exact worst case of `protocol` at (N, M, W), by exhaustive search,
    and (with `witness=True`) a shortest interleaving that reaches it.

    check-then-write: `worst_total` is the largest global count, `bound` is
    M + (N-1)*min(M, W). write-then-check: `worst_total` is the largest
    admitted count, `bound` is M (and it is reached); `extra` adds
    `worst_slot_total` (reservations included) and, unless `spurious=False`,
    `spurious_rejection`.

    `encoding="compact"` (check-then-write only) explores `CompactCheckThenWrite`: the
    same worst total in far fewer states, packed into integers when no witness is asked.
    `engine="spin"` has Spin search the compact encoding instead (`queueref.verify.promela`;
    check-then-write only, no witness, `max_states` does not apply): the same states and
    worst total, about twice as fast on large instances.
    """
    # OB-TABLE-1: the exact worst case; OB-BOUND-2: its shortest witness. The bound:
    # OB-BOUND-1 (check-then-write); OB-WTC-1, reached (OB-WTC-2), and OB-WTC-3's price.
    if servers < 1 or cap < 0 or weight < 1:
        raise ValueError("need servers >= 1, cap >= 0, weight >= 1")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    began = time.perf_counter()
    if engine == "spin":
        return _explore_with_spin(protocol, servers, cap, weight, witness=witness)
    model = make_model(protocol, servers, cap, weight, encoding=encoding)
    extra: dict[str, object] = {}
    if isinstance(model, CompactCheckThenWrite) and not witness:
        states, worst, _ = model.search_packed(max_states)
        return Exploration(
            protocol=protocol,
            servers=servers,
            cap=cap,
            weight=weight,
            worst_total=worst,
            bound=overshoot_bound(servers, cap, weight),
            states=states,
            seconds=time.perf_counter() - began,
            extra={"encoding": encoding},
        )
    if encoding != "reference":
        extra["encoding"] = encoding
    if protocol == WRITE_THEN_CHECK:
        slot_total: Callable[[State], int] = lambda s: sum(s[:servers])
        found = search(model, parents=witness, also=[slot_total], max_states=max_states)
        extra["worst_slot_total"] = found.also[0]
    else:
        found = search(model, parents=witness, max_states=max_states)
    bound = protocol_bound(Protocol(protocol), servers, cap, weight)
    if spurious and protocol == WRITE_THEN_CHECK:
        extra["spurious_rejection"] = worst_spurious_rejection(protocol, servers, cap, weight)[0]
    return Exploration(
        protocol=protocol,
        servers=servers,
        cap=cap,
        weight=weight,
        worst_total=found.best_score,
        bound=bound,
        states=found.states,
        seconds=time.perf_counter() - began,
        witness=found.path() if witness else None,
        extra=extra,
    )


def _explore_with_spin(
    protocol: str, servers: int, cap: int, weight: int, *, witness: bool
) -> Exploration:
    """`explore` by Spin: the compact encoding's Promela text, the least claim that holds."""
    # OB-TABLE-3: Spin's states and worst total, the explorer's on every instance compared.
    if protocol != CHECK_THEN_WRITE or witness:
        raise ValueError("the spin engine explores check-then-write, without a witness")
    began = time.perf_counter()
    found = spin_worst_total(servers, cap, weight)
    return Exploration(
        protocol=protocol,
        servers=servers,
        cap=cap,
        weight=weight,
        worst_total=found.worst_total,
        bound=overshoot_bound(servers, cap, weight),
        states=found.states,
        seconds=time.perf_counter() - began,
        extra={"encoding": "compact", "engine": "spin"},
    )


def worst_spurious_rejection(
    protocol: str, servers: int, cap: int, weight: int
) -> tuple[int | None, tuple[Step, ...]]:
    """The price of the hard cap, under contention alone.

    Explores the protocol *without finishes* (so a check never reads a count that has
    gone away since: rejections come from the other checks in progress only) and returns
    the largest free capacity M - A at a rejection of a request of weight n that fits
    (A + n <= M, A the admitted count at the rejection), with a shortest trace ending in
    that rejection; `(None, ())` when no such rejection exists.
    """
    # OB-WTC-3: the spurious rejections of write-then-check.
    model: CheckThenWrite | WriteThenCheck
    if protocol == CHECK_THEN_WRITE:
        model = CheckThenWrite(servers, cap, weight, finishes=False)
    else:
        model = WriteThenCheck(servers, cap, weight, finishes=False)
    found = search(model, model.spurious_rejection, parents=True)
    if found.best_score < 0:
        return None, ()
    # End the trace with the rejection itself: a reject/rollback of a request that fits.
    admitted = model.total(found.best_state)
    for label, _ in model.successors(found.best_state):
        if label[0] in ("reject", "rollback"):
            n = model.dec[found.best_state[servers + label[1]]][0]
            if admitted + n <= cap:
                return found.best_score, found.path() + (Step(*label),)
    raise AssertionError("the best state has no spurious rejection")  # pragma: no cover


@dataclass(frozen=True)
class Leak:
    """A reachable state where nothing runs and nothing can ever be admitted."""

    # OB-BROKEN-3: the crash model's lost capacity, with a shortest witness.

    state: State
    witness: tuple[Step, ...]
    states: int


def capacity_leak(servers: int, cap: int, weight: int, *, reap: bool) -> Leak | None:
    """A reachable state of the crash model where no live server has a request, some
    server is alive, and no admission is reachable any more; None if there is none (as
    with `reap=True`, the fix).

    Computed backwards: the states from which an admission is reachable are the
    closure of those where one is enabled under the reversed transitions.
    """
    # OB-BROKEN-3: the leak without reaping; OB-BROKEN-4: none with it.
    model = Crash(servers, cap, weight, reap=reap)
    found = search(model, lambda s: 0, parents=True)
    assert found.parents is not None
    reverse: dict[State, list[State]] = {}
    live: set[State] = set()
    for state in found.parents:
        for label, nxt in model.successors(state):
            reverse.setdefault(nxt, []).append(state)
            if label[0] == "admit":
                live.add(state)
    todo = list(live)
    while todo:
        state = todo.pop()
        for prev in reverse.get(state, ()):
            if prev not in live:
                live.add(prev)
                todo.append(prev)
    everyone = (1 << servers) - 1
    stuck = [
        s
        for s in found.parents
        if s not in live and model.total(s) == 0 and s[-1] != everyone and cap >= 1
    ]
    if not stuck:
        return None
    # The first one in BFS order has a shortest witness.
    order = {s: i for i, s in enumerate(found.parents)}
    target = min(stuck, key=order.__getitem__)
    return Leak(target, found.path(target), found.states)
