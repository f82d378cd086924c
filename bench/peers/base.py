"""The two halves of a system adapter: a Server the harness runs (pinned, fresh data dir) and a Client
the load generator drives (asyncio, one process per role)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .common import cpu_seconds, free_port, proc_tree, rss_bytes, taskset, wait_port, write_bytes

OnBodies = Callable[[list[Any]], None]


@dataclass(frozen=True)
class Membership:
    """A consumer's place in a shape: number ``index`` of the ``members`` sharing its group; ``queues``: what
    the topic was prepared with (None: the adapter's default); ``fanout``: the topic was prepared with its
    groups (Client.prepare) and every group reads all of it."""

    index: int = 0
    members: int = 1
    queues: int | None = None
    fanout: bool = False


SOLO = Membership()


class ServerError(RuntimeError):
    pass


class Server:
    """One broker process tree on 127.0.0.1. Subclasses fill ``command()``/``env()``/``ready_port``."""

    name = "?"
    tiers: tuple[str, ...] = ("A", "B")
    start_timeout_s = 30.0

    def __init__(self, tier: str, root: str, cpu: int | None) -> None:
        self.tier = tier
        self.root = root  # fresh, owned by this server; removed by cleanup()
        self.cpu = cpu
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra_pids: list[int] = []  # daemons that outlive the main process (epmd)
        self.log_path = os.path.join(root, "server.log")
        self._log: Any = None
        os.makedirs(root, exist_ok=True)

    # -- to implement --------------------------------------------------------------------------
    def prepare(self) -> None:
        """Write config files, pick ports (first start only)."""

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    @property
    def ready_port(self) -> int:
        raise NotImplementedError

    def client_args(self) -> dict[str, Any]:
        raise NotImplementedError

    def data_dir(self) -> str:
        return self.root

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> float:
        """Start (or restart on the same data dir); returns seconds until the port accepted."""
        if self.proc is None and self._log is None:
            self.prepare()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            taskset(self.cpu) + self.command(),
            env=self.env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.root,
        )
        if not wait_port(self.ready_port, self.start_timeout_s, lambda: self.proc.poll() is None):
            self.stop()
            raise ServerError(f"{self.name} did not start: see {self.log_tail()}")
        return time.monotonic() - t0

    def pids(self) -> list[int]:
        if self.proc is None or self.proc.poll() is not None:
            return []
        return proc_tree(self.proc.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pids())

    def write_bytes(self) -> int:
        return write_bytes(self.pids())

    def rss_bytes(self) -> int:
        return rss_bytes(self.pids())

    def kill9(self) -> None:
        """SIGKILL the whole tree (the broker gets no chance to flush)."""
        pids = self.pids()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait(10)
        self._close_log()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            pids = self.pids()
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            for p in pids:  # anything left of the tree
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._close_log()

    def cleanup(self) -> None:
        self.stop()
        for p in self.extra_pids:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
            return data[-n:].decode(errors="replace")
        except OSError:
            return "(no log)"


class PortServer(Server):
    """A server reached on one port, picked at its first start and kept across restarts; clients get it."""

    def prepare(self) -> None:
        self.port = free_port()

    @property
    def ready_port(self) -> int:
        return self.port

    def client_args(self) -> dict[str, Any]:
        return {"port": self.port}


class Client:
    """Async client of one system. ``publish`` returns once the broker acknowledged per its tier."""

    supports_batch = False
    supports_auto_batch = False  # publish_auto: a producer that groups concurrent single sends itself

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args

    async def connect(self, role: str) -> None:
        """role: "producer" or "consumer" (one process per role)."""
        raise NotImplementedError

    async def prepare(self, topic: str, queues: int | None = None, groups: list[str] | None = None) -> None:
        """Create the topic / stream / queue (idempotent). ``queues``: how many queues the topic is split
        into, where the system has that notion (None: the adapter's default); ``groups``: the consumer
        groups that will each read every message (fan-out), for systems that must set that up before
        the first publish."""

    async def publish(self, topic: str, body: bytes) -> None:
        raise NotImplementedError

    async def publish_batch(self, topic: str, bodies: list[bytes]) -> None:
        raise NotImplementedError

    async def publish_auto(self, topic: str, body: bytes) -> None:
        """One message, acknowledged on its own, through the client's automatic batching."""
        raise NotImplementedError

    async def subscribe(self, topic: str, group: str, on_bodies: OnBodies, m: Membership = SOLO) -> None:
        """Consume ``topic`` from its beginning; call ``on_bodies`` with each batch of bodies. Clients
        subscribing with the same ``group`` share its messages; different groups each get every message."""
        raise NotImplementedError

    async def settle(self) -> None:
        """Return once this consumer holds its final share of the topic (after every member subscribed)."""

    async def unsubscribe(self) -> None:
        pass

    async def stored_count(self, topic: str) -> int | None:
        """How many messages the broker holds for ``topic`` (None: not known). Used only when a consumer
        fell short, to tell a consumer problem from a lost message."""
        return None

    async def close(self) -> None:
        pass


def python() -> str:
    return sys.executable
