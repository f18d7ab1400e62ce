"""ADM-PRE-1, ADM-PRE-5, ADM-PRE-6 (OB-ONE-1): the path models take the controller's steps.

Explorer traces of `PathModel` -- the witnesses of the worst count, of the spurious
rejection and of the wasted renders, and random walks with finishes and render failures
-- are replayed through real `AdmissionController`s on one shared buffer
(`start_check`, `read_next`, `decide`, the tracker's `reserve`, `add`,
`release_reservation` and `finish`): after every step every slot holds what the model
says, and every refusal of the model is a `QueueOverflowError` of the controller.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest

from queueref.admission.check import AdmissionCheck
from queueref.admission.controller import AdmissionController
from queueref.admission.paths import AdmissionPath
from queueref.admission.protocol import Protocol
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.errors import QueueOverflowError
from queueref.verify.admission_models import State
from queueref.verify.path_models import (
    PRE,
    RECHECK,
    ROLLBACK,
    PathModel,
    PathStep,
)
from queueref.verify.path_search import (
    explore_path,
    worst_spurious_rejection_path,
    worst_wasted_renders,
)

TWO = AdmissionPath.TWO_CHECK
GAP = AdmissionPath.TWO_CHECK_AWAIT_GAP
WTC = AdmissionPath.RESERVE_WRITE_THEN_CHECK
CTW = AdmissionPath.RESERVE_CHECK_THEN_WRITE


@dataclass
class Request:
    """The real objects behind one request of the model."""

    code: int = 0
    n: int = 0
    check: AdmissionCheck | None = None


@dataclass
class Replay:
    """N real controllers driven by the steps of a `PathModel`."""

    model: PathModel
    counters: list[int] = field(default_factory=list)
    servers: list[AdmissionController] = field(default_factory=list)
    requests: list[list[Request]] = field(default_factory=list)
    registered: list[list[str]] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        N, K = self.model.servers, self.model.K
        self.counters = [0] * SharedAdmissionStats.num_counters(N)
        wtc = self.model.path is WTC
        mode = Protocol.WRITE_THEN_CHECK if wtc else Protocol.CHECK_THEN_WRITE
        for p in range(N):
            stats = SharedAdmissionStats(self.counters, N, p)
            self.servers.append(AdmissionController(self.model.cap, shared_stats=stats, mode=mode))
        self.requests = [[Request() for _ in range(K)] for _ in range(N)]
        self.registered = [[] for _ in range(N)]

    def slots(self) -> list[int]:
        return [self.counters[8 * p] for p in range(self.model.servers)]

    def refuse(self, check: AdmissionCheck) -> None:
        """The model refuses at a read: the controller reads the rest, then refuses."""
        while not check.done:
            check.read_next()
        with pytest.raises(QueueOverflowError):
            check.decide()

    def step(self, state: State, step: PathStep) -> State:
        model, p = self.model, step.server
        request = self.requests[p][step.check]
        local = model.requests(state, p)[step.check]
        moves = [m for m in model.moves(state, p, local) if (m[0], m[1]) == (step.action, step.arg)]
        new = moves[0][3] if moves else local  # finish: no move of a request
        controller, tracker = self.servers[p], self.servers[p].tracker
        action = step.action
        if action in ("recheck", "refuse") and step.arg == 0:  # the second check begins
            request.check = controller.start_check(request.n)
        if action == "start":
            request.n, request.check = step.arg, controller.start_check(step.arg)
        elif action in ("read", "keep", "recheck"):
            assert request.check is not None
            request.check.read_next()
            if new[0] not in (PRE, RECHECK, ROLLBACK):
                request.check.decide()  # every slot read and it fits
        elif action in ("reject", "refuse", "rollback"):
            assert request.check is not None
            if action != "rollback":
                request.check.read_next()
            self.refuse(request.check)
        elif action == "reserve":
            tracker.reserve(request.n)
        elif action == "register":
            n = 1 if model.path in (TWO, GAP) else request.n  # two checks: child by child
            self.registered[p] += tracker.add(f"r{next(self.ids)}", n)
        elif action == "fail" and model.path in (WTC, CTW) and local[3] == 0:
            tracker.release_reservation(request.n)
        elif action == "finish":
            tracker.finish(self.registered[p].pop())
        after = model.step(state, step)
        if action != "finish":
            request.code = model.code(new)
            self.requests[p].sort(key=lambda r: r.code)
        assert self.slots() == list(model.slots(after)), (step, state, after)
        assert [r.code for r in self.requests[p]] == list(
            after[model.servers + p * model.K :][: model.K]
        )
        return after

    def run(self, steps: tuple[PathStep, ...] | list[PathStep]) -> State:
        state = self.model.initial()
        for step in steps:
            state = self.step(state, step)
        return state


CASES = [(TWO, 2, 2, 1, 1), (TWO, 2, 2, 2, 2), (GAP, 1, 2, 2, 2), (CTW, 2, 2, 2, 1),
         (CTW, 2, 2, 1, 2), (WTC, 2, 2, 2, 1), (WTC, 3, 2, 1, 1), (WTC, 2, 1, 1, 2)]  # fmt: skip


@pytest.mark.parametrize(("path", "n", "m", "w", "k"), CASES)
def test_adm_pre_witnesses_replay_through_the_controller(
    path: AdmissionPath, n: int, m: int, w: int, k: int
) -> None:
    """The worst-count witness ends at the same slots in the controllers."""
    row = explore_path(path, n, m, w, k, witness=True, prices=False)
    assert row.witness
    replay = Replay(PathModel(path, n, m, w, k))
    state = replay.run([PathStep(*s.raw()) for s in row.witness])
    assert replay.model.total(state) == row.worst_total


@pytest.mark.parametrize(("path", "n", "m", "w", "k"), CASES)
def test_adm_pre_refusals_replay_through_the_controller(
    path: AdmissionPath, n: int, m: int, w: int, k: int
) -> None:
    """The spurious-rejection and wasted-render traces refuse where the model does."""
    free, steps = worst_spurious_rejection_path(path, n, m, w, k)
    if free is not None:
        Replay(PathModel(path, n, m, w, k, finishes=False, failures=False)).run(steps)
    wasted, steps = worst_wasted_renders(path, n, m, w, k)
    Replay(PathModel(path, n, m, w, k, burst=True)).run(steps)
    assert sum(s.action == "refuse" for s in steps) == wasted


@pytest.mark.parametrize(("path", "n", "m", "w", "k"), CASES)
def test_adm_pre_random_walks_replay_through_the_controller(
    path: AdmissionPath, n: int, m: int, w: int, k: int
) -> None:
    """Random runs with finishes and render failures: the same slots at every step."""
    for seed in range(5):
        rng = random.Random(seed)
        model = PathModel(path, n, m, w, k)
        replay = Replay(model)
        state = model.initial()
        for _ in range(80):
            label, _ = rng.choice(model.successors(state))
            state = replay.step(state, PathStep(*label))
