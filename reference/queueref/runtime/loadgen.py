"""A closed-loop HTTP load generator: `hey` when installed, else a built-in asyncio client.

Models the test plan of vLLM PR #54746 (`hey` at 80 concurrent connections
against the API servers). The built-in client speaks raw HTTP/1.1 with
keep-alive over `asyncio.open_connection`: each of `concurrency` workers
sends one request, waits for the answer and sends the next, until the
duration is over. No dependency beyond the standard library.

Deliberate divergences from vLLM: none in vLLM itself; `hey` is an external
tool, the built-in client is queueref's, and it also checks every 503 body
against the documented one (E2E-SRV-2). The wire format comes from
`queueref.runtime.http.wire`, shared with the server, never from the server itself.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from queueref.runtime.http.wire import REQUEST_BODY, is_busy_body

__all__ = ["LoadError", "LoadReport", "run_builtin", "run_load"]

#: Called about once a second during a built-in run with the report so far (E2E-LOAD-2).
Progress = Callable[["LoadReport", float], None]


class LoadError(RuntimeError):
    """The target cannot be reached or the URL is wrong (E2E-CLI-1)."""


@dataclass
class LoadReport:
    """What a load run observed (E2E-LOAD-1)."""

    client: str
    concurrency: int
    duration: float
    sent: int = 0
    status: dict[int, int] = field(default_factory=dict)
    errors: int = 0
    bad_busy_bodies: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def ok(self) -> int:
        """Responses with status 200."""
        return self.status.get(200, 0)

    @property
    def busy(self) -> int:
        """Responses with status 503."""
        return self.status.get(503, 0)

    @property
    def completed(self) -> int:
        """Responses of any status."""
        return sum(self.status.values())

    @property
    def busy_rate(self) -> float:
        """The share of answered requests that got 503."""
        return self.busy / self.completed if self.completed else 0.0

    @property
    def throughput(self) -> float:
        """Successful (200) requests per second."""
        return self.ok / self.duration if self.duration > 0 else 0.0

    def percentile(self, q: float) -> float:
        """The q-quantile (0..1) of the latencies, in seconds (nearest rank)."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        rank = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
        return ordered[rank]

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON data (`load --json`, E2E-LOAD-2)."""
        return {
            "client": self.client,
            "concurrency": self.concurrency,
            "duration": self.duration,
            "sent": self.sent,
            "status": {str(code): count for code, count in sorted(self.status.items())},
            "ok": self.ok,
            "busy": self.busy,
            "busy_rate": self.busy_rate,
            "errors": self.errors,
            "bad_busy_bodies": self.bad_busy_bodies if self.client == "builtin" else None,
            "throughput": self.throughput,
            "latency": {
                f"p{int(q * 100)}": self.percentile(q) if self.latencies else None
                for q in (0.5, 0.9, 0.99)
            },
        }

    def summary(self) -> str:
        """The report, as `load` prints it (E2E-LOAD-1)."""
        statuses = ", ".join(f"[{code}] {count}" for code, count in sorted(self.status.items()))
        lines = [
            f"client: {self.client}, concurrency {self.concurrency}, "
            f"duration {self.duration:.2f} s",
            f"requests sent: {self.sent}",
            f"responses: {statuses or 'none'}; errors: {self.errors}",
            f"200: {self.ok}  503: {self.busy}  (503 rate {self.busy_rate:.1%})",
            f"throughput: {self.throughput:.1f} req/s (200 only), "
            f"{self.completed / self.duration if self.duration else 0.0:.1f} answers/s",
        ]
        if self.latencies:
            lines.append(
                "latency (s): "
                + "  ".join(f"p{int(q * 100)} {self.percentile(q):.4f}" for q in (0.5, 0.9, 0.99))
                + f"  max {max(self.latencies):.4f}"
            )
        if self.client == "builtin":
            lines.append(f"503 bodies not as documented: {self.bad_busy_bodies}")
        return "\n".join(lines)


def parse_url(url: str) -> tuple[str, int, str]:
    """(host, port, path) of an http:// URL; anything else is a `LoadError`."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise LoadError(f"not an http:// URL: {url!r}")
    try:
        port = parts.port or 80
    except ValueError:
        raise LoadError(f"bad port in URL: {url!r}") from None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.hostname, port, path


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """Status, body and whether the server keeps the connection open."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("connection closed")
    status = int(status_line.split()[1])
    length = 0
    keep_alive = True
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        key = name.strip().lower()
        if key == "content-length":
            length = int(value.strip())
        elif key == "connection" and value.strip().lower() == "close":
            keep_alive = False
    body = await reader.readexactly(length) if length else b""
    return status, body, keep_alive


async def _probe(host: str, port: int, timeout: float) -> None:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (TimeoutError, OSError) as error:
        raise LoadError(f"cannot connect to {host}:{port}: {error or 'timed out'}") from None
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass


async def run_builtin(
    url: str,
    concurrency: int,
    duration: float,
    *,
    connect_timeout: float = 3.0,
    request_timeout: float = 30.0,
    progress: Progress | None = None,
    body: bytes = REQUEST_BODY,
) -> LoadReport:
    """The built-in closed-loop client: `concurrency` keep-alive connections (E2E-LOAD-1).

    A request not answered within `request_timeout` seconds counts as an
    error and its connection is dropped (a hung server cannot hang the load).
    `progress(report, elapsed)` is called about once a second (E2E-LOAD-2).
    """
    host, port, path = parse_url(url)
    await _probe(host, port, connect_timeout)
    report = LoadReport("builtin", concurrency, duration)
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    start = time.monotonic()
    deadline = start + duration

    async def worker() -> None:
        writer: asyncio.StreamWriter | None = None
        reader: asyncio.StreamReader | None = None
        try:
            while time.monotonic() < deadline:
                if writer is None:
                    try:
                        reader, writer = await asyncio.open_connection(host, port)
                    except OSError:
                        report.errors += 1
                        await asyncio.sleep(0.05)
                        continue
                assert reader is not None
                sent_at = time.monotonic()
                report.sent += 1
                try:
                    writer.write(request)
                    await asyncio.wait_for(writer.drain(), request_timeout)
                    status, answer, keep_alive = await asyncio.wait_for(
                        _read_response(reader), request_timeout
                    )
                except (
                    OSError,
                    ConnectionError,
                    ValueError,
                    asyncio.IncompleteReadError,
                    TimeoutError,
                ):
                    report.errors += 1
                    writer.close()
                    writer = None
                    continue
                report.latencies.append(time.monotonic() - sent_at)
                report.status[status] = report.status.get(status, 0) + 1
                if status == 503 and not is_busy_body(answer):
                    report.bad_busy_bodies += 1
                if not keep_alive:
                    writer.close()
                    writer = None
        finally:
            if writer is not None:
                writer.close()

    async def ticker() -> None:
        while progress is not None:
            await asyncio.sleep(1.0)
            progress(report, time.monotonic() - start)

    tick = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        tick.cancel()
    report.duration = time.monotonic() - start
    return report


_STATUS_LINE = re.compile(r"^\s*\[(\d{3})\]\s+(\d+)\s+responses", re.MULTILINE)
_REQS_PER_SEC = re.compile(r"Requests/sec:\s+([0-9.]+)")
_PERCENTILE = re.compile(r"^\s*(\d+)%+ in ([0-9.]+) secs", re.MULTILINE)
_TOTAL = re.compile(r"Total:\s+([0-9.]+) secs")


def parse_hey(output: str, concurrency: int, duration: float) -> LoadReport:
    """A `LoadReport` from `hey`'s text summary (status distribution, latencies)."""
    report = LoadReport("hey", concurrency, duration)
    total = _TOTAL.search(output)
    if total:
        report.duration = float(total.group(1))
    for code, count in _STATUS_LINE.findall(output):
        report.status[int(code)] = int(count)
    report.sent = report.completed
    # hey prints only percentiles: keep them as a small latency sample.
    for _q, seconds in _PERCENTILE.findall(output):
        report.latencies.append(float(seconds))
    return report


def run_hey(url: str, concurrency: int, duration: float) -> LoadReport:
    """Drive the URL with `hey -z DURATION -c CONCURRENCY -m POST` (E2E-LOAD-1)."""
    hey = shutil.which("hey")
    if hey is None:
        raise LoadError("hey is not installed")
    host, port, _path = parse_url(url)
    asyncio.run(_probe(host, port, 3.0))
    command = [
        hey,
        "-z",
        f"{duration}s",
        "-c",
        str(concurrency),
        "-m",
        "POST",
        "-T",
        "application/json",
        "-d",
        REQUEST_BODY.decode(),
        url,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=duration + 60, check=False
    )
    if done.returncode != 0:
        raise LoadError(f"hey failed: {done.stderr.strip() or done.stdout.strip()}")
    return parse_hey(done.stdout, concurrency, duration)


def run_load(
    url: str,
    concurrency: int,
    duration: float,
    client: str = "auto",
    progress: Progress | None = None,
) -> LoadReport:
    """`hey` when installed (or asked for), else the built-in client (E2E-LOAD-1)."""
    if concurrency < 1:
        raise LoadError(f"--concurrency must be >= 1, got {concurrency}")
    if duration <= 0:
        raise LoadError(f"--duration must be > 0, got {duration}")
    if client == "hey" or (client == "auto" and shutil.which("hey") is not None):
        return run_hey(url, concurrency, duration)
    return asyncio.run(run_builtin(url, concurrency, duration, progress=progress))
