"""Contract teeth for queueref.trace.events, found by `make mutation`: each postcondition of the
event module is shown catching a broken variant (a patched helper the contract guards),
so a mutant that removes or weakens the contract is killed, for the reason it claims."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import icontract
import pytest

from queueref.trace import events
from queueref.trace.events import AdmissionEvent, max_admitted_in_flight, max_in_flight


def _json_writing(change: dict[str, Any], *, newline: bool = False) -> SimpleNamespace:
    """A stand-in for the `json` module of `queueref.trace.events` whose `dumps` writes a wrong
    record (`change` merged in) or breaks the line; `loads` is the real one."""

    def dumps(record: dict[str, Any], **options: Any) -> str:
        text = json.dumps({**record, **change}, **options)
        return text.replace(",", ",\n", 1) if newline else text

    return SimpleNamespace(dumps=dumps, loads=json.loads)


EVENT = AdmissionEvent(1.0, 0, "admit", "a", 2, view=1)


def test_to_json_refuses_a_record_that_breaks_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-EV-2: a `to_json` that writes two lines (the round trip still holds: JSON
    reads the newline as a space) is caught by "one event is one line"."""
    monkeypatch.setattr(events, "json", _json_writing({}, newline=True))
    with pytest.raises(icontract.ViolationError, match="ADM-EV-2: one event is one line"):
        EVENT.to_json()


def test_to_json_refuses_a_record_that_does_not_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-EV-2: a `to_json` that writes another n (still one valid line) is caught by the
    round-trip postcondition."""
    monkeypatch.setattr(events, "json", _json_writing({"n": 3}))
    with pytest.raises(icontract.ViolationError, match=r"ADM-EV-2: from_json\(to_json\(e\)\)"):
        EVENT.to_json()


#: Two admitted, and beside them a rejection, a finish and an abort of more: only the
#: admits count (a kind compared by order, `>=` or `<=` "admit", would count others).
MIXED = [
    EVENT,
    AdmissionEvent(1.5, 1, "reject", "b", 3, view=2),
    AdmissionEvent(2.0, 0, "finish", "a", 2, t_before=1.9),
    AdmissionEvent(2.5, 1, "abort", "c", 2, t_before=2.4),
]


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (-1, "ADM-EV-4: the maximum is never negative"),
        (3, "ADM-EV-4: the maximum never exceeds everything admitted"),
    ],
)
def test_max_in_flight_refuses_a_sweep_out_of_range(
    monkeypatch: pytest.MonkeyPatch, wrong: int, message: str
) -> None:
    """ADM-EV-4: a sweep that goes negative, or above the 2 admitted (though below the
    n of the admits plus any other kind's), is caught by the postconditions of `max_in_flight`;
    the true sweep gives 2."""
    assert max_in_flight(MIXED) == 2
    monkeypatch.setattr(events, "sweep", lambda points: wrong)
    with pytest.raises(icontract.ViolationError, match=message):
        max_in_flight(MIXED)


def test_max_admitted_in_flight_refuses_a_negative_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-EV-5: a sweep that goes negative is caught by "the maximum is never negative"."""
    assert max_admitted_in_flight([EVENT]) == 2
    monkeypatch.setattr(events, "sweep", lambda points: -1)
    with pytest.raises(icontract.ViolationError, match="ADM-EV-5: the maximum is never negative"):
        max_admitted_in_flight([EVENT])


def test_an_event_is_one_request_unless_told() -> None:
    """ADM-EV-1: `n` defaults to 1 (one request); `view`, `t_before`, `tokens` and
    `token_view` to None."""
    event = AdmissionEvent(1.0, 0, "finish", "a")
    assert event.n == 1
    assert (event.view, event.t_before, event.tokens, event.token_view) == (None,) * 4


def test_a_departure_takes_away_exactly_its_n_before_the_maximum() -> None:
    """ADM-EV-4: a finish gives back n, not more: admit a, finish a, then admit b and c
    reaches 2 (levels 1, 0, 1, 2; a departure of n + 1 would leave the maximum at 1)."""
    events = [
        AdmissionEvent(0.0, 0, "admit", "a", 1, view=0),
        AdmissionEvent(1.0, 0, "finish", "a", 1, t_before=0.9),
        AdmissionEvent(2.0, 1, "admit", "b", 1, view=0),
        AdmissionEvent(3.0, 1, "admit", "c", 1, view=1),
    ]
    assert max_in_flight(events) == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"event": "finish", "tokens": 3}, "tokens must be None for a finish event, got 3"),
        ({"tokens": -1}, "tokens must be an int >= 0 or None, got -1"),
    ],
)
def test_a_bad_tokens_field_is_named_for_what_is_wrong(
    fields: dict[str, Any], message: str
) -> None:
    """ADM-EV-1, ADM-EV-6: tokens on a departure are refused as such, a negative count on a
    decision as a bad count (kills the swapped messages)."""
    base: dict[str, Any] = {"t": 1.0, "server": 0, "event": "admit", "request_id": "a", "n": 1}
    with pytest.raises(ValueError) as caught:
        AdmissionEvent(**{**base, **fields})
    assert str(caught.value) == f"ADM-EV-1: {message}"


def test_an_event_is_immutable_and_hashable() -> None:
    """ADM-EV-1: an event is a frozen record: a checked event cannot be changed after its
    schema check, and equal events hash alike (a trace can be a set)."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        EVENT.n = 5  # type: ignore[misc]
    assert EVENT.n == 2
    assert len({EVENT, AdmissionEvent(1.0, 0, "admit", "a", 2, view=1)}) == 1
