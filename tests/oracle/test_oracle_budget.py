"""The oracle without cliffs: bounded shrinking and search, and progress (ORC-SIZE-4, ORC-SIZE-5).

A program of 200 calls that needs 33 adds to fail shrinks for minutes in
Hypothesis (it stops only after its own 300 s), and each further round of
the search for more failures costs as much again. The budget in calls
bounds both; these tests lower it to show what happens when it is spent,
and run the maxlen-32 queue of issue 30 with `max_calls=200` as a user would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_oracle import PopFromBack, TwoIndependentBugs, run_program, with_factory
from test_oracle_size import Bounded32

import queueref.config
from queueref import FCFSRequestQueue
from queueref.oracle import ConformanceError, check_request_queue, search_budget


@pytest.fixture
def without_deep_checks() -> Iterator[None]:
    """As a user runs it: the whole-structure contracts off (they cost O(n) a call)."""
    queueref.config.set_deep_checks(False)
    yield
    queueref.config.set_deep_checks(True)


def _message(queue: type, **options: object) -> ConformanceError:
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(queue, "fcfs", **options)  # type: ignore[arg-type]
    return caught.value


def test_a_spent_shrinking_budget_keeps_the_shortest_program_so_far(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ORC-SIZE-4: shrinking stops at its budget; the program found so far still fails.

    The message says it may not be the shortest, the program fails on the
    buggy queue and runs clean on the reference, and the verdict and program
    are the same on a second run (the budget counts calls, not seconds).
    """
    monkeypatch.setattr(search_budget, "SHRINK_CALLS", 3)
    first = _message(PopFromBack, max_failures=1)
    assert first.reports[0].shrunk is False
    assert "before the shrinking budget (3 calls, ORC-SIZE-4) ran out" in str(first)
    assert "initial_requests=(50, 100) reaches one in a single step" in str(first)
    assert run_program(first.program) is not None
    assert run_program(with_factory(first.program, "PopFromBack", FCFSRequestQueue)) is None
    again = _message(PopFromBack, max_failures=1)
    assert again.program == first.program
    unbounded = _message(PopFromBack, max_failures=1, max_examples=200)
    assert unbounded.program.count("\n") <= first.program.count("\n")


def test_with_the_default_budget_a_short_program_is_shrunk_to_the_end() -> None:
    """ORC-SIZE-4: the default shrinking budget does not cut a default-sized search short."""
    error = _message(PopFromBack, max_failures=1)
    assert error.reports[0].shrunk is True
    assert "shrinking budget" not in str(error)


def test_a_spent_search_budget_stops_the_search_for_more_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ORC-SIZE-4: after the first failure the search stops when its budget is spent; it says so."""
    monkeypatch.setattr(search_budget, "EXTRA_SEARCH_CALLS", 1)
    error = _message(TwoIndependentBugs)
    assert len(error.reports) == 1
    assert "The search for more failures stopped when its budget (1 calls" in str(error)
    assert "there may be more" in str(error)


def test_a_long_check_prints_progress_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-SIZE-5: past the threshold the check says on stderr where it is; stdout stays clean."""
    monkeypatch.setattr(search_budget, "PROGRESS_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(search_budget, "PROGRESS_EVERY_SECONDS", 0.0)
    _message(PopFromBack, max_failures=1, max_examples=20)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines and all(line.startswith("queueref oracle: ") for line in lines)
    assert any("looking for a failure" in line for line in lines)
    assert any("1 failure found, shrinking a failure" in line for line in lines)


def test_a_quick_check_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """ORC-SIZE-5: a check that ends within the threshold is silent."""
    check_request_queue(FCFSRequestQueue, "fcfs", max_examples=20)
    assert capsys.readouterr() == ("", "")


@pytest.mark.slow
def test_max_calls_200_catches_the_maxlen_32_queue_on_a_bounded_budget(
    without_deep_checks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORC-SIZE-4, issue 30: `max_calls=200` on a deque(maxlen=32) gives a verdict, and
    after its first failure the check spends at most the documented budget.

    Before the budget it gave none after 300 s (Hypothesis shrank a
    200-call program for its own 300 s, then the next round did it again). The
    budget is counted in calls, so this test counts calls, not seconds (the time,
    about 16 s on the 2-core machine, is a row of `make bench`): from the first
    failure on, at most `SHRINK_CALLS` + `EXTRA_SEARCH_CALLS`, give or take the
    one batch of calls that crosses a limit.
    """
    spent = {"at_first_failure": -1, "largest_batch": 0}
    meter_class = search_budget.WorkMeter
    spend, failure_seen = meter_class.spend, meter_class.failure_seen

    def counted_spend(meter: search_budget.WorkMeter, calls: int = 1) -> None:
        spent["largest_batch"] = max(spent["largest_batch"], calls)
        spend(meter, calls)

    def counted_failure(meter: search_budget.WorkMeter) -> None:
        if spent["at_first_failure"] < 0:
            spent["at_first_failure"] = meter.total
        failure_seen(meter)

    meters: list[search_budget.WorkMeter] = []
    init = meter_class.__init__

    def remembered(meter: search_budget.WorkMeter, *args: object, **kwargs: object) -> None:
        init(meter, *args, **kwargs)  # type: ignore[arg-type]
        meters.append(meter)

    monkeypatch.setattr(meter_class, "spend", counted_spend)
    monkeypatch.setattr(meter_class, "failure_seen", counted_failure)
    monkeypatch.setattr(meter_class, "__init__", remembered)
    error = _message(Bounded32, max_calls=200)
    (meter,) = meters
    assert spent["at_first_failure"] >= 0
    after_first = meter.total - spent["at_first_failure"]
    budget = search_budget.SHRINK_CALLS + search_budget.EXTRA_SEARCH_CALLS
    assert after_first <= budget + 2 * spent["largest_batch"], (after_first, budget)
    assert {report.clause for report in error.reports} <= {"RQ-ALL-1", "RQ-ALL-8"}
    for program in error.failures:
        assert run_program(program) is not None
        assert run_program(with_factory(program, "Bounded32", FCFSRequestQueue)) is None
