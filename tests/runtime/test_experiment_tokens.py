"""The experiment's token-limit run (E2E-EXP-3): real servers, real load, the records' maximum.

`make test` runs these after the others, serially (they start real processes).
"""

from __future__ import annotations

import json

import pytest

from queueref.runtime.experiment import ModeResult, format_table, run_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

N, CAP, TOKEN_CAP, CLIENTS, SECONDS, SERVICE_MS = 2, 100, 30, 24, 2.0, 300.0

#: The weights n * p of the run's requests: (1, 8), (2, 16), (3, 4), (4, 12).
WEIGHTS = {8, 32, 12, 48}


@pytest.fixture(scope="module")
def results() -> dict[str, ModeResult]:
    runs = run_experiment(
        num_servers=N,
        cap=CAP,
        concurrency=CLIENTS,
        duration=SECONDS,
        service_time_ms=SERVICE_MS,
        max_num_queued_tokens=TOKEN_CAP,
    )
    return {result.mode: result for result in runs}


def test_every_mode_is_clean_and_rejects_by_tokens(results: dict[str, ModeResult]) -> None:
    """E2E-EXP-3: no forbidden decision, every slot back to 0, token 503s seen and well formed."""
    assert list(results) == ["local", "check-then-write", "write-then-check"]
    for result in results.values():
        assert result.trace.ok, result.trace.summary()
        assert result.final_slots == [0] * N
        assert result.load.busy > 0 and result.load.bad_busy_bodies == 0
        assert result.trace.max_request_tokens in WEIGHTS
        assert any(e.event == "prefill_done" for e in result.events)
        assert any(e.token_view is not None for e in result.events if e.event == "reject")
        row = json.loads(json.dumps(result.to_dict()))
        assert row["max_num_queued_tokens"] == TOKEN_CAP and row["within_bound"]
    assert "max global queued tokens" in format_table(list(results.values()))


def test_the_queued_tokens_against_their_bounds(results: dict[str, ModeResult]) -> None:
    """E2E-EXP-3: local overshoots Mt; check-then-write stays within Mt - 1 + N * P;
    write-then-check within Mt."""
    local, ctw, wtc = (
        results["local"],
        results["check-then-write"],
        results["write-then-check"],
    )
    p_local = local.trace.max_request_tokens
    assert local.token_bound == N * (TOKEN_CAP - 1 + p_local)
    assert local.max_queued_tokens is not None and local.max_queued_tokens > TOKEN_CAP
    p_ctw = ctw.trace.max_request_tokens
    assert ctw.token_bound == TOKEN_CAP - 1 + N * p_ctw
    assert ctw.max_queued_tokens is not None
    assert ctw.max_queued_tokens <= TOKEN_CAP - 1 + N * p_ctw
    assert wtc.token_bound == TOKEN_CAP
    assert wtc.max_queued_tokens is not None and wtc.max_queued_tokens <= TOKEN_CAP
