"""The real parts of a fault run: Redis in the run's own network namespace, serve nodes.

Used by `queueref.runtime.faults.runs` (`make faults`; `specs/multi-node.md`, E2E-FAULT-1..4).
Only loopback and the namespaces made here are ever addressed: `NetnsRedis`
makes one namespace holding a redis-server and one veth pair per node, with
link-local /30 subnets of its own; a partition takes one node's link down.
`ServeNode` is one `queueref serve --store` node in its own process group, so
a fault can stop, continue or kill -9 the whole node (parent and workers).
Everything started here is stopped by `close()`, which is safe to call twice
and after a failed start; a namespace is deleted only if this object made it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final

from queueref.runtime.store.redis_server import LOOPBACK, free_port

#: The prefix of every namespace and interface a fault run makes (cleanup finds them by it).
PREFIX: Final = "qf"

#: Redis's port inside the run's namespace (the namespace has its own ports).
NETNS_PORT: Final = 6379

#: Every process this module started, so a run can show none is left (E2E-FAULT-1).
STARTED: list[subprocess.Popen[bytes]] = []

#: Every loopback port a node or a Redis of a fault run listened on (E2E-FAULT-1).
PORTS: list[int] = []


def ports_in_use() -> list[int]:
    """The ports of `PORTS` something still listens on (none after a run)."""
    busy = []
    for port in sorted(set(PORTS)):
        with socket.socket() as probe:
            # A closed connection's TIME_WAIT is no listener: a server rebinds over it too.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                busy.append(port)
    return busy


def _popen(args: list[str], **options: object) -> subprocess.Popen[bytes]:
    process: subprocess.Popen[bytes] = subprocess.Popen(args, **options)  # type: ignore[call-overload]
    STARTED.append(process)
    return process


def _live_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that are not zombies (a zombie runs nothing)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, _, group = stat.rsplit(")", 1)[1].split()[:3]
        if int(group) == pgid and state != "Z":
            members.append(int(entry))
    return members


def still_running(grace: float = 5.0) -> list[int]:
    """The pids started here (or in their process groups) still running after `grace` s."""
    deadline = time.monotonic() + grace
    while True:
        alive = sorted(
            {pid for process in STARTED for pid in _live_members(process.pid)}
            | {process.pid for process in STARTED if process.poll() is None}
        )
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def require(binary: str, package: str) -> str:
    """The path of `binary`, or a clear failure naming the Debian package (`make faults`)."""
    path = shutil.which(binary)
    if path is None:
        raise RuntimeError(
            f"{binary} is not installed: run `make faults` as root "
            f"(it runs `apt-get install -y {package}`)"
        )
    return path


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=20)


def _stop(process: subprocess.Popen[bytes] | None, group: bool = False) -> None:
    """SIGTERM (the whole group when `group`), SIGKILL after 5 s; reaped."""
    if process is None or process.poll() is not None:
        if process is not None and group:
            _kill_group(process.pid, signal.SIGKILL)  # a worker may outlive its parent
        return
    if group:
        _kill_group(process.pid, signal.SIGCONT)  # a stopped group cannot act on SIGTERM
        _kill_group(process.pid, signal.SIGTERM)
    else:
        process.terminate()
    try:
        process.wait(timeout=8)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if group:
        _kill_group(process.pid, signal.SIGKILL)


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


class NetnsRedis:
    """A redis-server alone in a network namespace this run made, one veth link per node.

    Node i reaches Redis at `url(i)` over its own link, so `cut(i)` partitions
    node i alone while the others keep their store (E2E-FAULT-2).
    """

    def __init__(self, links: int) -> None:
        self.binary = require("redis-server", "redis-server")
        require("ip", "iproute2")
        self.tag = f"{PREFIX}{os.getpid() % 100000}"
        self.namespace = f"{self.tag}-ns"
        self.links = links
        self._made = False
        self._dir = tempfile.TemporaryDirectory(prefix="queueref-netns-redis-")
        self.process: subprocess.Popen[bytes] | None = None
        # 169.254.<200+pid>.<4i+1..2>: link-local, never routed beyond the link.
        self._octet = 200 + os.getpid() % 50

    def host_side(self, link: int) -> str:
        return f"{self.tag}h{link}"

    def address(self, link: int) -> str:
        return f"169.254.{self._octet}.{4 * link + 2}"

    def url(self, link: int) -> str:
        return f"redis://{self.address(link)}:{NETNS_PORT}/0"

    def start(self) -> None:
        _run("ip", "netns", "add", self.namespace)
        self._made = True
        inside = ("ip", "netns", "exec", self.namespace)
        _run(*inside, "ip", "link", "set", "lo", "up")
        for link in range(self.links):
            host, peer = self.host_side(link), f"{self.tag}n{link}"
            _run("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
            _run("ip", "link", "set", peer, "netns", self.namespace)
            _run("ip", "addr", "add", f"169.254.{self._octet}.{4 * link + 1}/30", "dev", host)
            _run("ip", "link", "set", host, "up")
            _run(*inside, "ip", "addr", "add", f"{self.address(link)}/30", "dev", peer)
            _run(*inside, "ip", "link", "set", peer, "up")
        binds = [self.address(link) for link in range(self.links)]
        self.process = _popen(
            [*inside, self.binary, "--bind", *binds, "--port", str(NETNS_PORT), "--save", "",
             "--appendonly", "no", "--dir", self._dir.name, "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_for_redis(self.address(0), NETNS_PORT, self.process)

    def cut(self, link: int) -> None:
        """The partition: node `link`'s only way to Redis goes down."""
        _run("ip", "link", "set", self.host_side(link), "down")

    def heal(self, link: int) -> None:
        _run("ip", "link", "set", self.host_side(link), "up")

    def close(self) -> None:
        _stop(self.process)
        self.process = None
        if self._made:
            for link in range(self.links):
                subprocess.run(
                    ["ip", "link", "del", self.host_side(link)], capture_output=True, timeout=20
                )
            subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True, timeout=20)
            self._made = False
        self._dir.cleanup()


def _wait_for_redis(host: str, port: int, process: subprocess.Popen[bytes]) -> None:
    import redis

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        client = redis.Redis(host=host, port=port, socket_timeout=0.5, socket_connect_timeout=0.5)
        try:
            if client.ping():
                return
        except redis.RedisError:
            time.sleep(0.05)
        finally:
            client.close()
    raise RuntimeError(f"redis-server did not start on {host}:{port}")


class ServeNode:
    """One `queueref serve --store` node in its own process group (parent and workers)."""

    def __init__(self, name: str, url: str, trace_dir: Path, args: list[str]) -> None:
        self.name = name
        self.port = free_port()
        PORTS.append(self.port)
        self.url = f"http://{LOOPBACK}:{self.port}/v1/completions"
        self._log: IO[bytes] = tempfile.TemporaryFile()
        self.command = [
            sys.executable, "-m", "queueref", "serve", "--store", url, "--node", name,
            "--port", str(self.port), "--trace", str(trace_dir), "--restart", *args,
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the node's processes (`wait_ready` then waits for its first line)."""
        self.process = _popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,  # its own process group: a fault hits the whole node
        )

    def wait_ready(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline().decode(errors="replace")
        if "API server process" not in line:
            self._log.seek(0)
            problem = self._log.read().decode(errors="replace").strip().splitlines()
            raise RuntimeError(f"node {self.name} did not start: {problem[-1:] or line!r}")

    def signal(self, sig: signal.Signals) -> None:
        """SIGSTOP, SIGCONT or SIGKILL to the node's whole process group."""
        assert self.process is not None
        _kill_group(self.process.pid, sig)
        if sig is signal.SIGKILL:
            self.process.wait(timeout=10)

    def close(self) -> None:
        _stop(self.process, group=True)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


def leftovers() -> list[str]:
    """The namespaces and links of fault runs still present (E2E-FAULT-1: none after a run)."""
    found: list[str] = []
    for command in (["ip", "netns", "list"], ["ip", "-o", "link", "show"]):
        listing = subprocess.run(command, capture_output=True, text=True, timeout=20).stdout
        for line in listing.splitlines():
            words = line.replace(":", " ").split()
            names = [w.split("@")[0] for w in words]
            found += [n for n in names if n.startswith(PREFIX) and n[len(PREFIX) :][:1].isdigit()]
    return sorted(set(found))


class SentinelRedis:
    """A primary, one replica and one Sentinel on loopback; `failover()` forces a promotion.

    The nodes reach Redis through the Sentinel (`--store-sentinel MASTER`), so
    after the failover they follow the promoted replica (E2E-FAULT-2).
    """

    MASTER: Final = "queueref-faults"

    def __init__(self) -> None:
        self.binary = require("redis-server", "redis-server")
        self.sentinel_binary = require("redis-sentinel", "redis-sentinel")
        self.ports = [free_port(), free_port()]
        self.sentinel_port = free_port()
        PORTS.extend([*self.ports, self.sentinel_port])
        self._dir = tempfile.TemporaryDirectory(prefix="queueref-sentinel-")
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.sentinel_port}/0"

    def _spawn(self, args: list[str]) -> subprocess.Popen[bytes]:
        process = _popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self._dir.name
        )
        self.processes.append(process)
        return process

    def start(self) -> None:
        import redis

        for index, port in enumerate(self.ports):
            folder = Path(self._dir.name) / f"redis-{index}"
            folder.mkdir()
            args = [self.binary, "--bind", LOOPBACK, "--port", str(port), "--save", "",
                    "--appendonly", "no", "--dir", str(folder)]  # fmt: skip
            if index == 1:
                args += ["--replicaof", LOOPBACK, str(self.ports[0])]
            _wait_for_redis(LOOPBACK, port, self._spawn(args))
        replica = redis.Redis(host=LOOPBACK, port=self.ports[1], socket_timeout=1)
        try:
            _until(lambda: replica.info("replication").get("master_link_status") == "up")
        finally:
            replica.close()
        config = Path(self._dir.name) / "sentinel.conf"
        config.write_text(
            f"port {self.sentinel_port}\nbind {LOOPBACK}\ndir {self._dir.name}\n"
            f"sentinel monitor {self.MASTER} {LOOPBACK} {self.ports[0]} 1\n"
            f"sentinel down-after-milliseconds {self.MASTER} 1000\n"
            f"sentinel failover-timeout {self.MASTER} 5000\n"
        )
        _wait_for_redis(
            LOOPBACK, self.sentinel_port, self._spawn([self.sentinel_binary, str(config)])
        )
        sentinel: Any = redis.Redis(host=LOOPBACK, port=self.sentinel_port, socket_timeout=1)
        try:
            _until(lambda: len(sentinel.execute_command("SENTINEL", "REPLICAS", self.MASTER)) == 1)
        finally:
            sentinel.close()

    def primary_port(self) -> int:
        import redis

        sentinel: Any = redis.Redis(host=LOOPBACK, port=self.sentinel_port, socket_timeout=1)
        try:
            _, port = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.MASTER)
        finally:
            sentinel.close()
        return int(port)

    def failover(self) -> None:
        """SENTINEL FAILOVER, and wait until the replica is the primary Sentinel names."""
        import redis

        before = self.primary_port()
        sentinel: Any = redis.Redis(host=LOOPBACK, port=self.sentinel_port, socket_timeout=1)
        try:
            # NOGOODSLAVE until the Sentinel has fresh news of the replica: ask again.
            _until(lambda: sentinel.execute_command("SENTINEL", "FAILOVER", self.MASTER))
        finally:
            sentinel.close()
        _until(lambda: self.primary_port() != before)
        promoted = redis.Redis(host=LOOPBACK, port=self.primary_port(), socket_timeout=1)
        try:
            _until(lambda: promoted.info("replication").get("role") == "master")
        finally:
            promoted.close()

    def close(self) -> None:
        for process in reversed(self.processes):
            _stop(process)
        self.processes = []
        self._dir.cleanup()


def _until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # not answering yet
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {seconds:g} s waiting for Redis or Sentinel")
