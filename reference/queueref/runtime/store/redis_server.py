"""A real `redis-server` for a run: bound to loopback, on a free port, stopped by its PID.

Used by the tests of the multi-node store (never a fake) and by
`queueref experiment --nodes`, which starts one Redis for the run. When
`redis-server` is missing it fails with the install command (`make setup`
installs it), never skips.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process on loopback; `stop()` and `start()` again on the same port."""

    def __init__(self, password: str | None = None, persistent: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed: run `make setup` "
                "(as root it runs `apt-get install -y redis-server`)"
            )
        self.binary = binary
        self.port = free_port()
        self.password = password
        # ADM-FAULT-1: an append-only file synced at every write: a restart loses no count.
        self.persistent = persistent
        self._dir = tempfile.TemporaryDirectory(prefix="queueref-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f"default:{self.password}@" if self.password else ""
        return f"redis://{auth}{LOOPBACK}:{self.port}/0"

    def start(self) -> None:
        args = [
            self.binary,
            "--bind", LOOPBACK,
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "yes" if self.persistent else "no",
            "--appendfsync", "always",
            "--dir", self._dir.name,
            "--protected-mode", "yes",
        ]  # fmt: skip
        if self.password:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self._dir.name
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((LOOPBACK, self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    reply = conn.recv(64)
                    # Up, and done reading its append-only file: until then every
                    # command answers LOADING (a restart with persistence, under load).
                    if reply and not reply.startswith(b"-LOADING"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not start on {LOOPBACK}:{self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()

    @property
    def workdir(self) -> Path:
        return Path(self._dir.name)
