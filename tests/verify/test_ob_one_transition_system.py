"""One transition system: explorer, proof kernels and implementation take the same steps.

* The explorer's models and the step functions of the CrossHair obligations
  (`queueref.verify.inductive`) are run in lockstep on random walks: same slots, same
  checks in progress, same decisions (OB-ONE-1).
* Explorer traces -- the tightness witnesses, the spurious-rejection traces, random walks
  with finishes -- are replayed through real `AdmissionController`s sharing one counter
  buffer, driven one slot read at a time (`start_check`, `read_next`, `decide`, then the
  tracker's `add`; `finish`): every value read, every decision and every slot after
  every step must be the model's (OB-ONE-1, OB-BOUND-2, OB-WTC-1).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from queueref.admission import protocol
from queueref.admission.check import AdmissionCheck
from queueref.admission.controller import AdmissionController
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.admission.tracker import RequestTracker
from queueref.errors import QueueOverflowError
from queueref.verify.admission_models import CheckThenWrite, Model, State, Step, WriteThenCheck
from queueref.verify.inductive import fine
from queueref.verify.inductive import write_then_check as wtc
from queueref.verify.search import explore, worst_spurious_rejection


def random_walk(model: Model, steps: int, rnd: random.Random) -> list[Step]:
    state = model.initial()
    trace: list[Step] = []
    for _ in range(steps):
        options = model.successors(state)
        if not options:  # M = 0 under check-then-write: nothing can ever start
            break
        label, state = options[rnd.randrange(len(options))]
        trace.append(Step(*label))
    return trace


# --- explorer <-> proof kernels ---------------------------------------------------------


def _fine_view(servers: int, ghost: tuple[Any, ...]) -> tuple[Any, ...]:
    st = fine.FineState(servers, ghost)
    readers = tuple(
        (st.n[p], st.k[p], st.v[p] if st.k[p] < servers else 0) if st.busy[p] else (0, 0, 0)
        for p in range(servers)
    )
    return tuple(st.c), readers


def _explorer_view(model: CheckThenWrite | WriteThenCheck, state: State) -> tuple[Any, ...]:
    N = model.servers
    readers = []
    for p in range(N):
        n, k, v = model.dec[state[N + p]]
        readers.append((n, k, v if k < N else 0))
    return tuple(state[:N]), tuple(readers)


def test_check_then_write_explorer_and_proof_kernels_agree_step_by_step() -> None:
    """OB-ONE-1, OB-MODEL-1: every explorer step is the inductive step function's step (an
    early rejection is the remaining reads and the rejecting decision, at once), and the
    invariant OB-FINE-1 holds all along."""
    rnd = random.Random(11)
    for trial in range(40):
        servers, cap, weight = 2 + trial % 3, 1 + trial % 4, 1 + trial % 3
        model = CheckThenWrite(servers, cap, weight)
        state, ghost = model.initial(), fine.fine_initial(servers)
        for step in random_walk(model, 120, rnd):
            state = model.step(state, step)
            p = step.server
            if step.action == "start":
                ghost = fine.fine_start(servers, cap, ghost, p, step.arg)
            elif step.action == "read":
                ghost = fine.fine_read(servers, ghost, p, step.arg)
            elif step.action == "reject":
                for slot in range(step.arg, servers):
                    ghost = fine.fine_read(servers, ghost, p, slot)
                before = fine.FineState(servers, ghost).c
                ghost = fine.fine_decide(servers, cap, ghost, p)
                assert fine.FineState(servers, ghost).c == before  # rejected: nothing written
            elif step.action == "admit":
                before = fine.FineState(servers, ghost).c[p]
                ghost = fine.fine_decide(servers, cap, ghost, p)
                assert fine.FineState(servers, ghost).c[p] > before  # admitted
            else:
                ghost = fine.fine_finish(servers, ghost, p)
            assert _fine_view(servers, ghost) == _explorer_view(model, state), step
            assert fine.fine_invariant(servers, cap, weight, ghost)


def test_write_then_check_explorer_and_proof_kernels_agree_step_by_step() -> None:
    """OB-ONE-1, OB-WTC-1: the same for write-then-check (a doomed check reads the rest at
    once and rolls back later, as its own step)."""
    rnd = random.Random(12)
    for trial in range(40):
        servers, cap, weight = 2 + trial % 3, trial % 4, 1 + trial % 3
        model = WriteThenCheck(servers, cap, weight)
        state, ghost = model.initial(), wtc.reserve_initial(servers)
        for step in random_walk(model, 120, rnd):
            state = model.step(state, step)
            p = step.server
            if step.action == "start":
                ghost = wtc.reserve_start(servers, ghost, p, step.arg)
            elif step.action == "read":
                ghost = wtc.reserve_read(servers, ghost, p, step.arg)
                if model.dec[state[servers + p]][1] == servers:  # decided: read the rest now
                    for slot in range(step.arg + 1, servers):
                        ghost = wtc.reserve_read(servers, ghost, p, slot)
            elif step.action in ("keep", "rollback"):
                st = wtc.ReserveState(servers, ghost)
                assert protocol.keeps_reservation(st.v[p], cap) == (step.action == "keep")
                ghost = wtc.reserve_decide(servers, cap, ghost, p)
            else:
                ghost = wtc.reserve_finish(servers, ghost, p)
            st = wtc.ReserveState(servers, ghost)
            readers = tuple(
                (st.n[q], st.k[q], 0 if st.k[q] == servers else st.v[q]) for q in range(servers)
            )
            explorer_readers = tuple(
                (n, k, 0 if k == servers else v)
                for n, k, v in (model.dec[state[servers + q]] for q in range(servers))
            )
            assert (tuple(st.c), readers) == (state[:servers], explorer_readers), step
            assert wtc.reserve_admitted(servers, ghost) == model.admitted(state)
            assert wtc.reserve_invariant(servers, cap, weight, ghost)


#: Small enough to search exhaustively in a few seconds in all.
BOUND_TABLE = [(n, m, w) for n in (1, 2, 3) for m in (0, 1, 2, 3) for w in (1, 2, 3)]


def bound_disagreements(
    formula: Any, protocols: tuple[protocol.Protocol, ...]
) -> list[tuple[str, int, int, int, int, int]]:
    """Every (protocol, N, M, W) where `formula` differs from the worst total the
    explorer's search reached (never the explorer's `bound` field: that is the formula)."""
    wrong = []
    for name in protocols:
        for n, m, w in BOUND_TABLE:
            worst = explore(name.value, n, m, w, spurious=False).worst_total
            claimed = formula(name, n, m, w)
            if claimed != worst:
                wrong.append((name.value, n, m, w, claimed, worst))
    return wrong


TABLE_PROTOCOLS = (protocol.Protocol.CHECK_THEN_WRITE, protocol.Protocol.WRITE_THEN_CHECK)


def test_the_one_bound_function_is_the_exhaustive_worst_case() -> None:
    """OB-ONE-1, OB-BOUND-1, OB-WTC-1: `protocol.bound` -- the function the stress run, the
    Hypothesis machine, the trace checker and the vectors call -- equals the worst global
    count the exhaustive search reaches, for every small (N, M, W)."""
    assert bound_disagreements(protocol.bound, TABLE_PROTOCOLS) == []


def test_the_exhaustive_table_refutes_a_wrong_bound() -> None:
    """OB-BOUND-1: the table check has teeth: a bound that forgets `min(M, W)` (or that
    gives write-then-check the overshoot of check-then-write) disagrees with the search."""

    def forgets_the_min(name: protocol.Protocol, n: int, m: int, w: int) -> int:
        return m + (n - 1) * w if name is protocol.Protocol.CHECK_THEN_WRITE else m

    def overshoots_everywhere(name: protocol.Protocol, n: int, m: int, w: int) -> int:
        return protocol.overshoot_bound(n, m, w)

    wrong = bound_disagreements(forgets_the_min, TABLE_PROTOCOLS[:1])
    assert ("check-then-write", 2, 1, 2, 3, 2) in wrong
    wrong = bound_disagreements(overshoots_everywhere, TABLE_PROTOCOLS[1:])
    assert ("write-then-check", 2, 1, 1, 2, 1) in wrong


# --- explorer <-> implementation --------------------------------------------------------


class Servers:
    """N real AdmissionControllers sharing one counter buffer, driven one step at a time."""

    def __init__(self, servers: int, cap: int, mode: str) -> None:
        self.counters = [0] * SharedAdmissionStats.num_counters(servers)
        self.stats = [SharedAdmissionStats(self.counters, servers, p) for p in range(servers)]
        self.trackers = [RequestTracker(s) for s in self.stats]
        self.controllers = [
            AdmissionController(
                max_num_queued_reqs=cap,
                tracker=t,
                shared_stats=s,
                mode=mode,  # type: ignore[arg-type]
            )
            for t, s in zip(self.trackers, self.stats, strict=True)
        ]
        self.checks: list[AdmissionCheck | None] = [None] * servers
        self.served = 0

    def slots(self) -> tuple[int, ...]:
        per = SharedAdmissionStats.COUNTERS_PER_SLOT
        return tuple(self.counters[p * per] for p in range(len(self.stats)))

    def read(self, p: int, slot: int, expected: int) -> None:
        check = self.checks[p]
        assert check is not None and check.next_slot == slot
        assert check.read_next() == expected

    def read_rest(self, p: int) -> None:
        check = self.checks[p]
        assert check is not None
        while not check.done:
            assert check.read_next() == self.slots()[check.next_slot - 1]

    def admit(self, p: int) -> None:
        check = self.checks[p]
        assert check is not None
        check.decide()  # raises QueueOverflowError if the implementation rejects
        self.served += 1
        self.trackers[p].add(f"r{self.served}", check.n)
        self.checks[p] = None

    def reject(self, p: int) -> None:
        check = self.checks[p]
        assert check is not None
        with pytest.raises(QueueOverflowError):
            check.decide()
        self.checks[p] = None


def replay_through_implementation(
    model: CheckThenWrite | WriteThenCheck, trace: list[Step]
) -> Servers:
    """OB-ONE-1: the real servers follow `trace` and agree with `model` after every step."""
    N = model.servers
    mode = "check-then-write" if isinstance(model, CheckThenWrite) else "write-then-check"
    real = Servers(N, model.cap, mode)
    state = model.initial()
    for step in trace:
        before = state
        state = model.step(state, step)
        p = step.server
        if step.action == "start":
            real.checks[p] = real.controllers[p].start_check(step.arg)
        elif step.action == "read":
            real.read(p, step.arg, model.slots(before)[step.arg])
            if model.dec[state[N + p]][1] == N:
                real.read_rest(p)
            if isinstance(model, CheckThenWrite) and step.arg + 1 < N:
                check = real.checks[p]
                assert check is not None and check.view == model.dec[state[N + p]][2]
        elif step.action == "reject":
            real.read(p, step.arg, model.slots(before)[step.arg])
            real.read_rest(p)
            real.reject(p)
        elif step.action in ("admit", "keep"):
            real.admit(p)
        elif step.action == "rollback":
            real.reject(p)
        elif step.action == "finish":
            real.trackers[p].finish(real.trackers[p].request_ids()[0])
        else:  # pragma: no cover
            raise AssertionError(step)
        assert real.slots() == model.slots(state), (step, real.slots(), model.slots(state))
    return real


@pytest.mark.parametrize(("servers", "cap", "weight"), [(2, 1, 1), (3, 2, 1), (2, 3, 2), (3, 3, 2)])
def test_tightness_witness_replays_through_the_implementation(
    servers: int, cap: int, weight: int
) -> None:
    """OB-ONE-1, OB-BOUND-2: the real controllers reach M + (N-1)*min(M, W) on the witness."""
    row = explore("check-then-write", servers, cap, weight, witness=True)
    assert row.witness is not None
    real = replay_through_implementation(CheckThenWrite(servers, cap, weight), list(row.witness))
    assert sum(real.slots()) == row.worst_total == cap + (servers - 1) * min(cap, weight)


def test_write_then_check_traces_replay_through_the_controller() -> None:
    """OB-ONE-1, OB-WTC-1, OB-WTC-3: the hard-cap witness and the spurious-rejection trace
    replay through `mode="write-then-check"`: same reservations, same keeps, same rollbacks."""
    for servers, cap, weight in [(2, 1, 1), (2, 2, 2), (3, 2, 1)]:
        row = explore("write-then-check", servers, cap, weight, witness=True)
        assert row.witness is not None
        replay_through_implementation(WriteThenCheck(servers, cap, weight), list(row.witness))
        _, spurious = worst_spurious_rejection("write-then-check", servers, cap, weight)
        assert spurious and spurious[-1].action == "rollback"
        replay_through_implementation(WriteThenCheck(servers, cap, weight), list(spurious))


def test_random_walks_replay_through_the_implementation() -> None:
    """OB-ONE-1: random interleavings with finishes, rejections and both protocols."""
    rnd = random.Random(13)
    for trial in range(24):
        servers, cap, weight = 2 + trial % 2, trial % 4, 1 + trial % 3
        for model in (CheckThenWrite(servers, cap, weight), WriteThenCheck(servers, cap, weight)):
            replay_through_implementation(model, random_walk(model, 80, rnd))


def test_the_implementation_decides_with_the_protocol_step_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OB-ONE-1: AdmissionController's decision is `protocol.admits_check_then_write`:
    replacing that function changes what the real controller admits."""
    real = Servers(1, 5, "check-then-write")
    real.checks[0] = real.controllers[0].start_check(1)
    real.read_rest(0)
    monkeypatch.setattr(protocol, "admits_check_then_write", lambda view, n, cap: False)
    real.reject(0)
    monkeypatch.undo()
    real.checks[0] = real.controllers[0].start_check(1)
    real.read_rest(0)
    real.admit(0)
    assert real.slots() == (1,)
