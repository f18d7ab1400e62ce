"""serve with a token limit (E2E-SRV-8): real processes, real sockets on 127.0.0.1, real HTTP.

Every test stops what it started and checks that no process is left and the port is free.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from processes import wait_gone

from queueref.oracle.trace_check import check_admission_trace
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.ports import port_is_free
from queueref.trace.files import read_trace_folder

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

HOST = "127.0.0.1"
TOKEN_CAP = 10

#: vLLM 0.30.0's MaxQueuedTokensError answer, as `create_error_response` shapes it.
TOKEN_BUSY = {
    "error": {
        "message": (
            "The server has a backlog of prompt tokens waiting for prefill. "
            "Please try again later, or send the request to another instance."
        ),
        "type": "Service Unavailable",
        "param": None,
        "code": 503,
    }
}


def post(url: str, body: dict[str, object]) -> tuple[int, dict]:  # type: ignore[type-arg]
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def gauge(base: str, name: str) -> int:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        text = response.read().decode()
    match = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (-?\d+)$", text, re.MULTILINE)
    assert match is not None, text
    return int(match.group(1))


def until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[HttpServers]:
    group = HttpServers(
        2,
        100,
        "check-then-write",
        port=0,
        service_time_ms=6000.0,
        jitter=0.0,
        prefill_ms=3000.0,
        trace_dir=tmp_path / "trace",
        max_num_queued_tokens=TOKEN_CAP,
    )
    with group:
        yield group
    assert wait_gone(group.started_pids, 10) == []
    assert port_is_free(HOST, group.port)


def test_token_limit_rejects_at_the_cap_and_admits_after_prefill(
    servers: HttpServers, tmp_path: Path
) -> None:
    """E2E-SRV-8: n * prompt length is queued; >= Mt answers vLLM's token 503; prefill frees."""
    url = servers.url
    base = url.rsplit("/v1/", 1)[0]
    assert gauge(base, "queueref:max_num_queued_tokens") == TOKEN_CAP
    answers: list[tuple[int, dict]] = []  # type: ignore[type-arg]

    def held(body: dict[str, object]) -> threading.Thread:
        thread = threading.Thread(target=lambda: answers.append(post(url, body)))
        thread.start()
        return thread

    # n=2 of a 3-token prompt: 6 tokens; then a prompt of six words: 6 more (12 >= 10).
    first = held({"prompt_token_ids": [1, 2, 3], "n": 2})
    assert until(lambda: gauge(base, "queueref:global_num_queued_tokens") == 6, 1.0)
    second = held({"prompt": "one two three four five six"})
    assert until(lambda: gauge(base, "queueref:global_num_queued_tokens") == 12, 1.0)
    assert gauge(base, "queueref:global_num_requests_running") == 3
    # The queued tokens reached Mt: any request, however short, gets the token 503.
    assert post(url, {"prompt": "hi"}) == (503, TOKEN_BUSY)
    # Both prefills done: the tokens left the count, the requests still run.
    assert until(lambda: gauge(base, "queueref:global_num_queued_tokens") == 0, 6.0)
    assert gauge(base, "queueref:global_num_requests_running") == 3
    status, answer = post(url, {"prompt": "hi", "max_tokens": 4})
    assert status == 200 and len(answer["choices"]) == 1
    first.join(20)
    second.join(20)
    assert sorted(status for status, _ in answers) == [200, 200]
    events = read_trace_folder(tmp_path / "trace", 2).events
    assert [(e.event, e.n) for e in events if e.event in ("admit", "reject")] == [
        ("admit", 2),
        ("admit", 1),
        ("reject", 1),
        ("admit", 1),
    ]
    # ORC-TR-14, ORC-TR-15: the real run's token records are clean and reach 12 tokens.
    assert [e.tokens for e in events if e.event == "prefill_done"] == [3, 3, 6, 1]
    report = check_admission_trace(
        tmp_path / "trace", 2, 100, max_n=2, max_num_queued_tokens=TOKEN_CAP
    )
    assert report.ok, report.summary()
    assert (report.max_queued_tokens, report.token_bound) == (12, TOKEN_CAP - 1 + 2 * 6)
