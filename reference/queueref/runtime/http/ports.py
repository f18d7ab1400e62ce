"""The port of `serve`: checked free before any server process starts (E2E-CLI-1)."""

from __future__ import annotations

import errno
import socket


class PortInUseError(OSError):
    """The port of `serve` is taken by another program (E2E-CLI-1)."""


def reserve_port(host: str, port: int) -> int:
    """Check that (host, port) is free and return it; port 0 picks a free one (E2E-CLI-1).

    Binds without `SO_REUSEPORT`, so any other listener on the port makes it
    fail, then releases it for the server processes.
    """
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        chosen: int = probe.getsockname()[1]
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise PortInUseError(error.errno, f"port {port} on {host} is already in use") from None
        raise
    finally:
        probe.close()
    return chosen


def port_is_free(host: str, port: int) -> bool:
    """Whether nothing listens on (host, port) any more (E2E-SRV-4)."""
    try:
        reserve_port(host, port)
    except OSError:
        return False
    return True
