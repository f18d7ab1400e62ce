"""Token records and `check-trace --max-num-queued-tokens` (ADM-EV-6, ORC-TR-14, ORC-TR-15).

Hand-written traces whose token counts and verdicts are written out by hand
from specs/oracle.md; traces recorded by queueref's own `APIServer` fronts
with a token limit, which must be judged clean.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from queueref.admission.controller import AdmissionController
from queueref.admission.front import APIServer
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.admission.tracker import RequestTracker
from queueref.cli.main import main
from queueref.errors import AdmissionRejected
from queueref.oracle import check_admission_trace
from queueref.trace.events import AdmissionEvent, write_jsonl

CAP = 10  # M, large enough never to bind here
TOKENS = 10  # Mt


def admit(
    t: float, server: int, rid: str, n: int, p: int, token_view: int | None, view: int = 0
) -> AdmissionEvent:
    return AdmissionEvent(t, server, "admit", rid, n, view=view, tokens=p, token_view=token_view)


def prefill(t: float, server: int, rid: str, p: int) -> AdmissionEvent:
    return AdmissionEvent(t, server, "prefill_done", rid, 1, t_before=t - 0.05, tokens=p)


def finish(t: float, server: int, rid: str) -> AdmissionEvent:
    return AdmissionEvent(t, server, "finish", rid, 1, t_before=t - 0.05)


def valid_trace() -> list[AdmissionEvent]:
    return [
        admit(1.0, 0, "a", 2, 3, token_view=0),  # +6 -> 6
        admit(2.0, 1, "b", 1, 5, token_view=6, view=2),  # 6 < 10: +5 -> 11
        AdmissionEvent(2.5, 1, "reject", "c", 1, tokens=4, token_view=11),  # 11 >= 10
        prefill(3.0, 0, "0_a", 3),  # -> 8
        finish(4.0, 0, "0_a"),  # already out of prefill: -> 8
        finish(5.0, 0, "1_a"),  # still prefilling: -3 -> 5
        prefill(6.0, 1, "b", 5),  # -> 0
        finish(7.0, 1, "b"),
    ]


def test_a_valid_token_trace_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ORC-TR-14: the largest queued tokens (11) within Mt - 1 + N * P = 9 + 2 * 6 = 21."""
    report = check_admission_trace(valid_trace(), 2, CAP, max_n=2, max_num_queued_tokens=TOKENS)
    assert report.violations == (), report.summary()
    assert (report.max_queued_tokens, report.max_request_tokens, report.token_bound) == (11, 6, 21)
    assert report.ok
    path = tmp_path / "trace.jsonl"
    write_jsonl(valid_trace(), path)
    assert main(["check-trace", str(path), "--cap", "10", "--max-n", "2",
                 "--max-num-queued-tokens", "10", "--json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert (data["max_queued_tokens"], data["token_bound"], data["ok"]) == (11, 21, True)
    # Without --max-num-queued-tokens the token records are read and the tokens not judged.
    assert check_admission_trace(valid_trace(), 2, CAP, max_n=2).token_bound is None


def test_a_forbidden_token_admission_is_caught(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-15: under ge an admission whose token view is >= Mt is forbidden; exit 1."""
    trace = valid_trace()
    trace[1] = admit(2.0, 1, "b", 1, 5, token_view=10, view=2)
    report = check_admission_trace(trace, 2, CAP, max_n=2, max_num_queued_tokens=TOKENS)
    assert [(v.line, v.rule) for v in report.violations] == [(2, "ORC-TR-15")]
    assert "admitted although not token view 10 < token cap 10" in str(report.violations[0])
    assert not report.ok
    path = tmp_path / "trace.jsonl"
    write_jsonl(trace, path)
    assert main(["check-trace", str(path), "--cap", "10", "--max-n", "2",
                 "--max-num-queued-tokens", "10"]) == 1  # fmt: skip
    assert "ORC-TR-15" in capsys.readouterr().out
    # The fits rule counts the request's own tokens: 6 + 5 > 10 is forbidden there only.
    fits = valid_trace()
    fits[2] = AdmissionEvent(2.5, 1, "reject", "c", 1, tokens=4, token_view=7)
    ge = check_admission_trace(fits, 2, CAP, max_n=2, max_num_queued_tokens=TOKENS)
    assert [(v.line, v.rule) for v in ge.violations] == [(3, "ORC-TR-15")]  # 7 < 10 admits
    strict = check_admission_trace(
        valid_trace(), 2, CAP, max_n=2, max_num_queued_tokens=TOKENS, token_rule="fits"
    )
    assert [(v.line, v.rule) for v in strict.violations] == [(2, "ORC-TR-15")]
    assert "token view 6 + tokens 5 <= token cap 10" in strict.violations[0].message


@pytest.mark.guard
def test_a_broken_token_bound_and_bad_token_records_are_reported() -> None:
    """ORC-TR-14: 24 queued tokens break 9 + 2 * 6 = 21; a view below the own tokens, too."""
    stale = [
        admit(1.0, 0, "a", 1, 6, token_view=0),
        admit(1.1, 1, "b", 1, 6, token_view=0),
        admit(1.2, 0, "c", 1, 6, token_view=6, view=1),
        admit(1.3, 1, "d", 1, 6, token_view=6, view=1),
    ]
    report = check_admission_trace(stale, 2, CAP, max_num_queued_tokens=TOKENS)
    assert report.violations == ()
    assert (report.max_queued_tokens, report.token_bound, report.token_bound_holds) == (
        24,
        21,
        False,
    )
    assert not report.ok
    bad = [
        admit(1.0, 0, "a", 1, 6, token_view=0),
        admit(1.2, 0, "c", 1, 2, token_view=5, view=1),  # its own 6 tokens are queued: >= 6
        prefill(1.3, 0, "x", 3),  # unknown
        prefill(1.4, 0, "a", 4),  # a holds 6
        prefill(1.5, 0, "a", 0),  # already out of prefill: 0 is right
        AdmissionEvent(1.6, 0, "admit", "e", 1, view=2),  # no token view recorded
    ]
    report = check_admission_trace(bad, 1, CAP, max_num_queued_tokens=TOKENS)
    assert [(v.line, v.rule) for v in report.violations] == [
        (2, "ORC-TR-15"),
        (3, "ORC-TR-14"),
        (4, "ORC-TR-14"),
        (6, "ORC-TR-15"),
    ]
    assert "cannot have been read" in report.violations[0].message
    assert "no token view" in report.violations[3].message
    with pytest.raises(ValueError, match="ORC-TR-14"):
        check_admission_trace([], 1, CAP, max_num_queued_tokens=-1)
    with pytest.raises(ValueError, match="ORC-TR-14"):
        check_admission_trace([], 1, CAP, max_num_queued_tokens=1, token_rule="gt")


def test_token_fields_of_the_event_schema() -> None:
    """ADM-EV-6: tokens on decisions and prefill_done only; token_view on decisions only."""
    event = admit(1.0, 0, "a", 2, 3, token_view=4)
    assert json.loads(event.to_json())["tokens"] == 3
    assert AdmissionEvent.from_json(event.to_json()) == event
    assert "tokens" not in AdmissionEvent(1.0, 0, "admit", "a", 1, view=0).to_json()
    for bad in (
        {"event": "finish", "tokens": 1},
        {"event": "prefill_done", "token_view": 1},
        {"event": "prefill_done", "n": 2},
        {"event": "admit", "tokens": -1},
        {"event": "admit", "token_view": 1.5},
    ):
        fields = {"t": 1.0, "server": 0, "request_id": "a", "n": 1, **bad}
        with pytest.raises(ValueError, match="ADM-EV-1"):
            AdmissionEvent(**fields)  # type: ignore[arg-type]


def recorded_token_trace(rule: str, mode: str, seed: int, steps: int = 150) -> list[AdmissionEvent]:
    """A trace of two queueref APIServer fronts sharing one counter array, with a token limit."""
    rng = random.Random(seed)
    clock = itertools.count(1)
    counters = [0] * SharedAdmissionStats.num_counters(2)
    events: list[AdmissionEvent] = []
    servers = []
    for index in range(2):
        stats = SharedAdmissionStats(counters, 2, index)
        controller = AdmissionController(
            CAP,
            TOKENS,
            tracker=RequestTracker(stats),
            shared_stats=stats,
            mode=mode,  # type: ignore[arg-type]
            token_rule=rule,  # type: ignore[arg-type]
        )
        api = APIServer(
            controller, server_index=index, record=events.append, clock=lambda: float(next(clock))
        )
        servers.append(api)
    live: list[tuple[int, list[str]]] = []
    for step in range(steps):
        server = rng.randrange(2)
        choice = rng.random()
        if choice < 0.45:
            try:
                ids = servers[server].admit(f"r{step}", rng.randint(1, 3), rng.randint(1, 4))
                live.append((server, ids))
            except AdmissionRejected:
                pass
        elif live and choice < 0.75:
            index, children = live[rng.randrange(len(live))]
            servers[index].prefill_done(rng.choice(children))
        elif live:
            index, children = live[rng.randrange(len(live))]
            servers[index].finish(children.pop())
            if not children:
                live.remove((index, children))
    return events


@pytest.mark.parametrize(
    ("rule", "mode"),
    [("ge", "check-then-write"), ("fits", "check-then-write"), ("ge", "write-then-check")],
)
def test_traces_recorded_by_token_limited_fronts_are_clean(rule: str, mode: str) -> None:
    """ORC-TR-14, ORC-TR-15, ADM-EV-6: real fronts' token records pass, token bound included."""
    for seed in range(3):
        events = recorded_token_trace(rule, mode, seed)
        kinds = {e.event for e in events}
        assert {"admit", "reject", "prefill_done", "finish"} <= kinds
        assert any(e.token_view is not None for e in events if e.event == "reject")
        report = check_admission_trace(
            events, 2, CAP, max_n=3, mode=mode, max_num_queued_tokens=TOKENS, token_rule=rule
        )
        assert report.violations == (), report.summary()
        assert report.ok, report.summary()
        assert report.max_queued_tokens is not None and report.max_queued_tokens > 0
