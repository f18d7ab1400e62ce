"""Test helpers for the tests that start real processes: are they gone, read their output."""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Iterable
from typing import IO


def pids_alive(pids: Iterable[int]) -> list[int]:
    """The pids among `pids` that still exist (zombies count as gone)."""
    alive: list[int] = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            pass
        alive.append(pid)
    return alive


def wait_gone(pids: Iterable[int], seconds: float) -> list[int]:
    """Wait up to `seconds` for every pid to be gone; those still alive."""
    pending = list(pids)
    deadline = time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = pids_alive(pending)
    return pending


def read_line_within(stream: IO[str], seconds: float) -> str:
    """One line from a child's stdout, or a failure after `seconds` (never a hung suite)."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout=seconds):
            raise AssertionError(f"nothing printed within {seconds} s")
    return stream.readline()
