"""The broken variants of tests/helpers/waiting_variants.py are made from the real methods.

Each variant is its original with one named change: building one fails loudly,
naming the change, when its text is not found exactly once in the method; the
method rebuilt from its own source with no change behaves as the original (so
what a variant breaks is its change alone); and a variant overrides only the
methods its changes name.
"""

from __future__ import annotations

import inspect
import sys
from types import CodeType, FrameType

import icontract
import pytest
import waiting_variants
from waiting_variants import Change, ChangeDoesNotApply, broken_variant

from queueref import Request, RequestStatus, StepDecision, WaitingQueues

RUN, SKIP = StepDecision.RUN, StepDecision.SKIP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS

VARIANTS = {
    name: value
    for name, value in vars(waiting_variants).items()
    if inspect.isclass(value) and issubclass(value, WaitingQueues) and value is not WaitingQueues
}
#: Every method some variant changes.
CHANGED = sorted({c.function for name in VARIANTS for c in waiting_variants.CHANGES[name]})


def _lifecycle(wq: WaitingQueues) -> list[object]:
    """Every operation a variant changes: enqueue (a blocked one too), a step that
    promotes, skips and runs under a guard and a slot limit, preempt, a streaming pause
    and its update, finish, abort; returns every place and status at the end."""
    for rid in ["a", "b", "c"]:
        wq.enqueue(Request(rid, arrival_time=float(ord(rid))))
    wq.enqueue(Request("g", arrival_time=9.0, status=KV))
    wq.schedule_step(
        lambda r: SKIP if r.request_id == "a" else RUN,
        lambda r: r.request_id == "g",
        max_running=5,
        should_continue=lambda: True,
    )
    first, session, last = wq.running
    wq.preempt(first)
    wq.await_stream(session)
    paused = wq.num_paused_sessions
    wq.continue_stream(session)
    wq.finish(last)
    wq.abort(["a", first.request_id])
    statuses = [f"{rid}:{r.status.name}" for rid, r in sorted(wq._known.items())]
    queues = [[r.request_id for r in q] for q in (wq.waiting, wq._aside, wq.running)]
    return [statuses, queues, paused]


def _compiled(code: CodeType) -> tuple[object, ...]:
    return (code.co_code, code.co_consts, code.co_names)


def test_there_are_variants() -> None:
    assert len(VARIANTS) >= 22


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_variant_overrides_only_the_methods_its_changes_name(name: str) -> None:
    variant = VARIANTS[name]
    methods = {change.function for change in waiting_variants.CHANGES[name]}
    for key, value in vars(variant).items():
        if inspect.isfunction(value) and key not in methods and not key.startswith("__"):
            # icontract wraps the inherited public methods again: the original inside
            # (and makes an __init__ of its own, to check the invariants after it).
            same = inspect.unwrap(value) is inspect.unwrap(getattr(WaitingQueues, key))
            assert same, f"{name}.{key} is not named by a change"
    for method in methods:
        original = inspect.unwrap(getattr(WaitingQueues, method))
        changed = inspect.unwrap(vars(variant)[method])
        assert changed.__code__.co_filename == f"<{name}.{method}>"
        assert _compiled(changed.__code__) != _compiled(original.__code__), (
            f"{name}.{method} compiles to the original"
        )
    assert variant.__doc__ is not None and variant.__doc__.startswith("BROKEN: ")


@pytest.mark.parametrize("method", CHANGED)
def test_a_method_rebuilt_from_its_source_unchanged_behaves_as_the_original(method: str) -> None:
    """The rebuilding itself (source without decorators, run in the original's module
    namespace, contracts inherited) changes nothing: a variant differs by its change.
    The scenario calls the rebuilt method in at least one layout."""
    first_line = waiting_variants.method_source(method).splitlines()[0]
    unchanged = broken_variant("Unchanged", Change(method, "nothing", first_line, first_line))
    rebuilt = f"<Unchanged.{method}>"
    assert inspect.unwrap(vars(unchanged)[method]).__code__.co_filename == rebuilt
    calls: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename == rebuilt:
            calls.append(method)

    for layout in ("vllm-0.30", "vllm-0.33"):
        for policy in ("fcfs", "priority"):
            sys.setprofile(profile)
            try:
                got = _lifecycle(unchanged(policy, layout=layout))
            finally:
                sys.setprofile(None)
            assert got == _lifecycle(WaitingQueues(policy, layout)), (layout, policy)
    assert calls, f"the scenario never calls {method}"


@pytest.mark.contracts
def test_the_scenario_catches_a_change_it_reaches() -> None:
    """The comparison above is not vacuous: a real change on its path is caught."""
    with pytest.raises(icontract.ViolationError, match="WL-FIN-1"):
        _lifecycle(VARIANTS["FinishLosesRequest"]("fcfs"))


def test_a_change_that_no_longer_applies_fails_naming_it() -> None:
    gone = Change("_park", "parks nothing", "self.waiting_room.prepend(step_skipped)", "pass")
    with pytest.raises(ChangeDoesNotApply, match="Drifted: _park: 'parks nothing': .* found 0"):
        broken_variant("Drifted", gone)
    twice = Change("_select", "ambiguous", "return ", "return None or ")
    with pytest.raises(ChangeDoesNotApply, match="Ambiguous: _select: 'ambiguous'.* found [2-9]"):
        broken_variant("Ambiguous", twice)
