"""How a server is assembled, in process: one builder of a controller, and the trace base.

`ServerSpec.build` is the one place a server's controller is made (the token
rule and scope included); a serve process's app (`http_worker._build`) uses
it for every protocol. `HttpServers.read_events` reads the files of its own
servers, from the trace base up (a `serve --store` node's global indices).
No process is started here. Expected values are written out by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from queueref.admission.protocol import Protocol, TokenRule
from queueref.admission.shared_stats import allocate_admission_counters
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.store import NodeStore
from queueref.runtime.http.worker import HttpConfig, _build
from queueref.runtime.servers import ServerSpec
from queueref.trace.events import AdmissionEvent, write_jsonl
from queueref.trace.files import TraceFormatError


def spec(protocol: Protocol, **options: object) -> ServerSpec:
    counters = allocate_admission_counters(2, 3, 100)
    return ServerSpec(1, 2, counters, 3, 100, protocol, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("rule", ["ge", "fits"])
def test_the_spec_builds_the_controller_with_its_token_rule_and_scope(rule: str) -> None:
    """ADM-TOK-3, ADM-TOK-6, ADM-SRV-1: the token rule and scope reach the controller."""
    shared = spec(Protocol.CHECK_THEN_WRITE, token_rule=rule).build().controller
    assert shared.token_rule is TokenRule(rule)
    assert shared.token_scope == "shared" and shared.shared_stats is not None
    local_tokens = spec(Protocol.CHECK_THEN_WRITE, token_scope="local").build().controller
    assert local_tokens.token_scope == "local" and local_tokens.shared_stats is not None
    reserve = spec(Protocol.WRITE_THEN_CHECK, token_rule=rule).build().controller
    assert reserve.protocol is Protocol.WRITE_THEN_CHECK and reserve.token_rule is TokenRule(rule)


def test_a_local_server_decides_on_its_own_count() -> None:
    """E2E-SRV-1: local reads no shared stats (before vLLM PR #54746), whatever the array."""
    controller = spec(Protocol.LOCAL, token_rule="fits").build().controller
    assert controller.shared_stats is None
    assert controller.tracker.shared_stats is None
    assert controller.token_scope == "local" and controller.token_rule is TokenRule.FITS


def http_config(mode: Protocol) -> HttpConfig:
    return HttpConfig("127.0.0.1", 0, mode, 10.0)


@pytest.mark.parametrize(
    "protocol", [Protocol.LOCAL, Protocol.CHECK_THEN_WRITE, Protocol.WRITE_THEN_CHECK]
)
def test_a_serve_process_app_is_built_by_the_spec(protocol: Protocol) -> None:
    """ADM-TOK-3, E2E-SRV-1: the app's controller is the spec's, with the spec's token rule."""
    server = spec(protocol, token_rule="fits")
    app = _build(server, http_config(protocol), record=None)
    controller = app.api.controller
    assert controller.token_rule is TokenRule.FITS
    assert controller.protocol is (
        Protocol.WRITE_THEN_CHECK
        if protocol is Protocol.WRITE_THEN_CHECK
        else Protocol.CHECK_THEN_WRITE
    )
    assert (controller.shared_stats is None) == (protocol is Protocol.LOCAL)
    assert app.api.server_index == 1


# ---------------------------------------------------------------------------
# read_events from the trace base


def node(base: int) -> NodeStore:
    """A node of a deployment whose servers have global indices base, base + 1, ..."""
    return NodeStore("redis://127.0.0.1:1/0", "queueref", "b", base, 4)


def test_read_events_reads_the_nodes_own_files(tmp_path: Path) -> None:
    """E2E-TRACE-1, ADM-STORE-8: a node at base 2 reads server-2 and server-3, merged by t."""
    other_node = AdmissionEvent(0.1, 0, "admit", "x", 1, view=0)
    write_jsonl([other_node], tmp_path / "server-0.jsonl")  # not this node's: not read
    write_jsonl([AdmissionEvent(1.0, 2, "admit", "a", 1, view=0)], tmp_path / "server-2.jsonl")
    write_jsonl(
        [
            AdmissionEvent(0.5, 3, "admit", "b", 1, view=0),
            AdmissionEvent(2.0, 3, "finish", "b", 1, t_before=1.9),
        ],
        tmp_path / "server-3.jsonl",
    )
    servers = HttpServers(2, 3, "check-then-write", trace_dir=tmp_path, store=node(2))
    events = servers.read_events()
    assert [(e.t, e.server, e.request_id) for e in events] == [
        (0.5, 3, "b"),
        (1.0, 2, "a"),
        (2.0, 3, "b"),
    ]


def test_read_events_without_a_store_starts_at_server_0(tmp_path: Path) -> None:
    """E2E-TRACE-1: a plain serve group's files are server-0 .. server-N-1."""
    for index in range(2):
        event = AdmissionEvent(float(index), index, "reject", f"r{index}", 1, view=3)
        write_jsonl([event], tmp_path / f"server-{index}.jsonl")
    events = HttpServers(2, 3, "check-then-write", trace_dir=tmp_path).read_events()
    assert [(e.server, e.request_id) for e in events] == [(0, "r0"), (1, "r1")]


@pytest.mark.guard
def test_read_events_refuses_an_event_in_the_wrong_file(tmp_path: Path) -> None:
    """ORC-TR-13: an event of server 2 in server-3.jsonl is a TraceFormatError, not merged."""
    write_jsonl([AdmissionEvent(1.0, 2, "admit", "a", 1, view=0)], tmp_path / "server-2.jsonl")
    write_jsonl([AdmissionEvent(1.5, 2, "admit", "c", 1, view=1)], tmp_path / "server-3.jsonl")
    servers = HttpServers(2, 3, "check-then-write", trace_dir=tmp_path, store=node(2))
    with pytest.raises(TraceFormatError, match="server 2 in the file of server 3"):
        servers.read_events()
