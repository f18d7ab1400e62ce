"""Deprecated home of the HTTP servers: a re-export of the modules it was split into.

`queueref.http_wire` (request and error bodies), `queueref.http_app` (the
ASGI app), `queueref.http_worker` (the child: its socket and entry point)
and `queueref.http_group` (the port, the trace folder, the supervised
process group). Import from those; this module stays so that
existing imports keep working.
"""

from __future__ import annotations

from queueref.http_app import CompletionApp
from queueref.http_group import (
    SERVE_MODES,
    HttpConfig,
    HttpServers,
    PortInUseError,
    ServeMode,
    ServeResult,
    listening_socket,
    port_is_free,
    reserve_port,
    serve_process,
)
from queueref.http_wire import BUSY_ERROR_TYPE, COMPLETION_PATHS, busy_body, is_busy_body
from queueref.oracle.trace_check import trace_file

__all__ = [
    "BUSY_ERROR_TYPE",
    "COMPLETION_PATHS",
    "SERVE_MODES",
    "CompletionApp",
    "HttpConfig",
    "HttpServers",
    "PortInUseError",
    "ServeMode",
    "ServeResult",
    "busy_body",
    "is_busy_body",
    "listening_socket",
    "port_is_free",
    "reserve_port",
    "serve_process",
    "trace_file",
]
