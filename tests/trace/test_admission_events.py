"""Admission event records: schema, JSON lines, and the in-flight sweeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from queueref.trace.events import (
    AdmissionEvent,
    max_admitted_in_flight,
    max_in_flight,
    read_jsonl,
    write_jsonl,
)


def admit(t: float, server: int, rid: str, n: int = 1, view: int = 0) -> AdmissionEvent:
    return AdmissionEvent(t, server, "admit", rid, n, view)


def finish(
    t: float, server: int, rid: str, n: int = 1, t_before: float | None = None
) -> AdmissionEvent:
    return AdmissionEvent(t, server, "finish", rid, n, None, t_before)


@pytest.mark.parametrize(
    "fields",
    [
        {"event": "admitted"},
        {"n": 0},
        {"n": 1.0},
        {"server": -1},
        {"server": True},
        {"t": float("nan")},
        {"t": float("inf")},
        {"t": "1.0"},
        {"request_id": 3},
        {"event": "finish", "view": 2},
        {"view": 1.5},
        {"event": "finish", "t_before": 2.0},
        {"t_before": float("nan")},
    ],
)
def test_schema_is_enforced(fields: dict[str, Any]) -> None:
    """ADM-EV-1: an event that breaks the schema is a ValueError at construction."""
    base: dict[str, Any] = {"t": 1.0, "server": 0, "event": "admit", "request_id": "a", "n": 1}
    base.update(fields)
    with pytest.raises(ValueError, match="ADM-EV-1"):
        AdmissionEvent(**base)


def test_valid_events() -> None:
    """ADM-EV-1: each kind with its fields; view may be None (a token rejection); an int
    time is a valid time. Every field keeps the value it was given."""
    cases = [
        (1.0, 0, "admit", "a", 2, 3, None),
        (1.0, 0, "reject", "a", 1, None, None),
        (1.0, 0, "abort", "a", 3, None, 0.5),
        (1, 0, "finish", "0_a", 1, None, 1),
    ]
    for fields in cases:
        event = AdmissionEvent(*fields)  # type: ignore[arg-type]
        assert (event.t, event.server, event.event, event.request_id) == fields[:4]
        assert (event.n, event.view, event.t_before) == fields[4:]


def test_json_round_trip_one_line() -> None:
    """ADM-EV-2: one object on one line, t_before left out when None, exact round trip."""
    event = AdmissionEvent(12345.678901234, 3, "abort", "req\nwith newline", 2, None, 12345.6)
    line = event.to_json()
    assert "\n" not in line
    assert json.loads(line) == {
        "t": 12345.678901234,
        "server": 3,
        "event": "abort",
        "request_id": "req\nwith newline",
        "n": 2,
        "view": None,
        "t_before": 12345.6,
    }
    assert AdmissionEvent.from_json(line) == event
    plain = admit(1.5, 0, "a", view=4)
    assert "t_before" not in json.loads(plain.to_json())
    assert AdmissionEvent.from_json(plain.to_json()) == plain


@pytest.mark.guard
@pytest.mark.parametrize(
    "line",
    [
        '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"view":0,"extra":1}',
        '{"t":1.0,"server":0,"event":"admit","request_id":"a"}',
        "[1, 2]",
        '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":0,"view":0}',
    ],
)
def test_bad_json_lines(line: str) -> None:
    """ADM-EV-2: unknown or missing keys, or a bad value, are a ValueError."""
    with pytest.raises(ValueError, match="ADM-EV-1|ADM-EV-2"):
        AdmissionEvent.from_json(line)


def test_jsonl_files(tmp_path: Path) -> None:
    """ADM-EV-2: write_jsonl / read_jsonl keep the events and their order."""
    events = [admit(1.0, 0, "a", 2), finish(2.0, 0, "0_a", t_before=1.9), finish(3.0, 0, "1_a")]
    path = tmp_path / "events.jsonl"
    assert write_jsonl(events, path) == 3
    assert len(path.read_text(encoding="utf-8").splitlines()) == 3
    assert read_jsonl(path) == events


def test_sweep_counts_admits_and_departures() -> None:
    """ADM-EV-4: +n at admit, -n at departures, rejections ignored, in order of t."""
    events = [
        finish(5.0, 1, "0_b"),
        admit(1.0, 0, "a", 2),
        admit(2.0, 1, "b", 3),
        AdmissionEvent(2.5, 2, "reject", "c", 4, 5),
        AdmissionEvent(3.0, 0, "abort", "a", 2),
        admit(4.0, 2, "d", 1),
        finish(6.0, 1, "1_b", 2),
        finish(7.0, 2, "d"),
    ]
    # levels by hand: 2, 5, (reject), 3, 4, 3, 1, 0 -> max 5
    assert max_in_flight(events) == 5
    assert max_in_flight([]) == 0


def test_sweep_ties_count_admissions_first() -> None:
    """ADM-EV-4: at equal t an admission counts before a departure (the conservative side)."""
    events = [admit(1.0, 0, "a"), finish(2.0, 0, "a"), admit(2.0, 1, "b")]
    assert max_in_flight(events) == 2
    # The other tie order would say 1: the sweep is not that.
    assert max_in_flight(list(reversed(events))) == 2


def test_admitted_sweep_uses_t_before_and_departures_first() -> None:
    """ADM-EV-5: departures count from t_before; at a tie the departure goes first."""
    events = [
        admit(1.0, 0, "a"),
        finish(3.0, 0, "a", t_before=2.0),
        admit(2.0, 1, "b"),
        admit(2.5, 1, "c"),
    ]
    assert max_in_flight(events) == 3
    assert max_admitted_in_flight(events) == 2
    with pytest.raises(ValueError, match="ADM-EV-5"):
        max_admitted_in_flight([admit(1.0, 0, "a"), finish(2.0, 0, "a")])
