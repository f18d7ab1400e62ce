"""One validators module, one protocol vocabulary: every entry point agrees.

`queueref.validators` is the only definition of "an int" (a bool is not one),
and `queueref.admission.protocol` the only place that names the protocols and
states their bounds. These tests hold every caller to the same answer.
"""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Callable
from typing import Any

import pytest

from queueref import AdmissionController, Request, RequestTracker, SharedAdmissionStats
from queueref.admission import protocol
from queueref.admission.controller import MODES
from queueref.admission.protocol import Protocol, bound, parse_protocol
from queueref.admission.shared_stats import allocate_admission_counters
from queueref.oracle.trace_bounds import trace_bound
from queueref.oracle.trace_check import check_admission_trace
from queueref.runtime.servers import ServerSpec, controller_protocol
from queueref.trace.events import AdmissionEvent
from queueref.validators import is_index, is_int, is_int_at_least, is_limit, is_real

COUNT_ENTRY_POINTS: list[tuple[str, Callable[[Any], object]]] = [
    ("Request(n=...)", lambda v: Request("a", n=v)),
    ("Request(num_prompt_tokens=...)", lambda v: Request("a", num_prompt_tokens=v)),
    ("check_admission(n)", lambda v: AdmissionController(5).check_admission(v)),
    ("RequestTracker.add(n)", lambda v: RequestTracker().add("a", v)),
    ("RequestTracker.reserve(n)", lambda v: RequestTracker().reserve(v)),
    ("AdmissionController(limit)", lambda v: AdmissionController(v)),
    ("allocate_admission_counters", lambda v: allocate_admission_counters(v, 3)),
    ("SharedAdmissionStats", lambda v: SharedAdmissionStats([0] * 16, 2, v)),
    ("AdmissionEvent(n=...)", lambda v: AdmissionEvent(1.0, 0, "admit", "a", v, view=0)),
    ("check_admission_trace", lambda v: check_admission_trace([], v, 1)),
]


@pytest.mark.guard
@pytest.mark.parametrize(
    ("where", "call"), COUNT_ENTRY_POINTS, ids=[w for w, _ in COUNT_ENTRY_POINTS]
)
@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_is_not_a_count_anywhere(
    where: str, call: Callable[[Any], object], flag: bool
) -> None:
    """RQ-REQ-4, ADM-CTL-2, ADM-CTL-1, ADM-EV-1, ORC-TR-10: `n=True` is refused everywhere.

    Before one validators module, `Request("a", n=True)` was accepted while
    `check_admission(True)` was refused; now every entry point says no.
    """
    with pytest.raises(ValueError):
        call(flag)


def test_the_same_entry_points_accept_the_int() -> None:
    """The refusals above are about the bool, not the value: 1 (or 0) passes."""
    Request("a", n=1, num_prompt_tokens=0)
    assert AdmissionController(5).check_admission(1) == 0
    assert RequestTracker().add("a", 1) == ["a"]
    assert allocate_admission_counters(1, 3) is None
    assert AdmissionEvent(1.0, 0, "admit", "a", 1, view=0).n == 1
    assert check_admission_trace([], 1, 1).ok


@pytest.mark.guard
def test_a_bool_priority_or_arrival_time_is_not_a_request_field() -> None:
    """RQ-REQ-3, RQ-REQ-4: a bool priority or arrival time is a TypeError naming the field."""
    with pytest.raises(TypeError, match="priority"):
        Request("a", priority=True)
    with pytest.raises(TypeError, match="arrival_time"):
        Request("a", arrival_time=False)


@pytest.mark.guard
def test_the_validators_refuse_bools() -> None:
    assert is_int(1) and not is_int(True) and not is_int(1.0)
    assert is_int_at_least(2, 1) and not is_int_at_least(True, 1)
    assert is_index(0, 1) and not is_index(0, True) and not is_index(False, 1)
    assert is_limit(None) and is_limit(0) and not is_limit(False) and not is_limit(-1)
    assert is_real(1) and is_real(0.5) and not is_real(True) and not is_real("1")


def test_request_has_no_integer_check_of_its_own() -> None:
    """One definition: the modules that once had their own copies call the shared one."""
    import queueref.oracle.trace_check as trace_check
    import queueref.request as request

    assert not hasattr(request, "_is_int_at_least")
    assert not hasattr(trace_check, "_is_int")
    assert request.is_int_at_least is is_int_at_least  # type: ignore[attr-defined]


# --- one protocol vocabulary ---------------------------------------------------------


def test_e2e_cli_5_every_name_parses_to_its_protocol() -> None:
    """E2E-CLI-5: a protocol's name, or the `Protocol` itself, and nothing else."""
    assert parse_protocol("check-then-write") is Protocol.CHECK_THEN_WRITE
    assert parse_protocol("write-then-check") is Protocol.WRITE_THEN_CHECK
    assert parse_protocol(Protocol.LOCKED) is Protocol.LOCKED
    for old in ("shared", "reserve"):
        with pytest.raises(ValueError, match=f"unknown admission protocol {old!r}"):
            parse_protocol(old)
    with pytest.raises(ValueError, match="check-then-write, write-then-check, locked, local"):
        parse_protocol("lock")
    with pytest.raises(ValueError, match="unknown admission protocol"):
        parse_protocol("local", allowed=[Protocol.CHECK_THEN_WRITE])


@pytest.mark.parametrize("name", ["check-then-write", "write-then-check"])
def test_adm_ctl_1_a_mode_name_builds_its_controller(name: str) -> None:
    """ADM-CTL-1: `mode=` takes the protocol's name or the `Protocol`, and builds the same."""
    by_name = AdmissionController(4, mode=name)  # type: ignore[arg-type]
    by_protocol = AdmissionController(4, mode=Protocol(name))
    assert by_name.protocol is by_protocol.protocol is parse_protocol(name)
    assert by_name.mode == by_protocol.mode == name
    assert by_name.reserves == by_protocol.reserves == (name == "write-then-check")
    assert MODES == {
        "check-then-write": Protocol.CHECK_THEN_WRITE,
        "write-then-check": Protocol.WRITE_THEN_CHECK,
    }


@pytest.mark.guard
def test_an_unknown_mode_is_refused() -> None:
    """ADM-CTL-1: the controller runs two protocols; locked and local are built around it,
    and the old spellings `shared` and `reserve` are unknown modes."""
    for bad in ("locked", "local", "fast", True, "shared", "reserve"):
        with pytest.raises(ValueError, match="ADM-CTL-1"):
            AdmissionController(4, mode=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["check-then-write", "write-then-check", "locked"])
def test_a_server_spec_runs_the_protocol_it_names(name: str) -> None:
    """ADM-SRV-1: the name of a group protocol builds the controller it names."""
    server = ServerSpec(0, 1, None, 3, protocol=name).build()
    assert server.controller.protocol is controller_protocol(name)
    expected = (
        "write-then-check"
        if parse_protocol(name) is Protocol.WRITE_THEN_CHECK
        else ("check-then-write")
    )
    assert server.controller.mode == expected


def test_one_bound_function_serves_every_caller() -> None:
    """ADM-BOUND-1, ADM-BOUND-2, ORC-TR-10: the trace checker's bound is `protocol.bound`."""
    for mode in ("check-then-write", "write-then-check", "locked", "local"):
        for n, m, w in ((1, 0, 1), (3, 4, 2), (2, 1, 3)):
            assert trace_bound(mode, n, m, w) == bound(parse_protocol(mode), n, m, w)
    assert [bound(p, 3, 4, 2) for p in Protocol] == [8, 4, 4, 12]


@pytest.mark.parametrize("module", ["queueref.runtime.servers"])
def test_the_examples_in_docstrings_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_the_protocol_module_is_the_vocabulary() -> None:
    """E2E-CLI-5: the four names, and no table of old spellings beside them."""
    names = ["check-then-write", "write-then-check", "locked", "local"]
    assert [p.value for p in Protocol] == names
    assert not hasattr(protocol, "DEPRECATED_ALIASES")
