"""beanstalkd (apt beanstalkd): binlog in the data dir, fsync after every write (-f0, tier A) / at most once a
second (-f 1000, tier B).

Client: the peers spec names greenstalk, which is blocking; every system here is driven through asyncio, so
this is a small asyncio client of the beanstalk text protocol (put / reserve-with-timeout / delete /
stats-tube) that pipelines commands on one connection. beanstalkd has no consumer groups and no fan-out: a
tube is one work queue whose jobs go to one reserver each, so members of a group share the topic's tube and
a fan-out topic is one tube per group that the producer puts every message into. Its consumer cannot ask for
a batch either; it pipelines up to 256 reserves per round (one that waits, the rest non-blocking), sized by
what the last round found, and deletes what it got in the next round's write (acknowledged after the
listener ran, as the other systems' consumers)."""

from __future__ import annotations

import asyncio
import shutil
from collections import deque
from typing import Any

from .base import SOLO, Client, Membership, OnBodies, PortServer

MAX_JOB = 1 << 20  # -z: 64 KiB bodies exceed beanstalkd's default 65,535-byte limit
ROUND_MAX = 256  # reserves per round at most (the other consumers' batch size)
_FANOUT: dict[str, list[str]] = {}  # topic -> its groups' tubes (set by prepare, read by every client here)


class BeanstalkdServer(PortServer):
    name = "beanstalkd"

    def command(self) -> list[str]:
        fsync = ["-f", "0"] if self.tier == "A" else ["-f", "1000"]
        return [shutil.which("beanstalkd") or "beanstalkd", "-l", "127.0.0.1", "-p", str(self.port),
                "-b", self.root, *fsync, "-z", str(MAX_JOB)]  # fmt: skip


class BeanstalkError(RuntimeError):
    pass


class _Conn(asyncio.Protocol):
    """One connection; requests are pipelined and answered in order. ``call(payload, n)`` writes ``payload``
    (n commands) and resolves with their n replies, each (status line, data or None)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.waiters: deque[tuple[asyncio.Future[list[tuple[bytes, bytes | None]]], int, list[Any]]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or ConnectionResetError("beanstalkd closed the connection")
        while self.waiters:
            fut = self.waiters.popleft()[0]
            if not fut.done():
                fut.set_exception(self.lost)

    def call(self, payload: bytes, n: int) -> asyncio.Future[list[tuple[bytes, bytes | None]]]:
        fut = asyncio.get_running_loop().create_future()
        if self.lost is not None or self.transport is None:
            fut.set_exception(self.lost or ConnectionError("not connected"))
            return fut
        self.waiters.append((fut, n, []))
        self.transport.write(payload)
        return fut

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while self.waiters:
            reply = self._parse()
            if reply is None:
                break
            fut, n, got = self.waiters[0]
            got.append(reply)
            if len(got) == n:
                self.waiters.popleft()
                if not fut.done():
                    fut.set_result(got)
        if self.pos:
            del buf[: self.pos]
            self.pos = 0

    def _parse(self) -> tuple[bytes, bytes | None] | None:
        buf, pos = self.buf, self.pos
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        line = bytes(buf[pos:eol])
        if line.startswith((b"RESERVED ", b"OK ")):  # a body of the given length follows
            size = int(line.rsplit(b" ", 1)[1])
            end = eol + 2 + size
            if len(buf) < end + 2:
                return None
            self.pos = end + 2
            return line, bytes(buf[eol + 2 : end])
        self.pos = eol + 2
        return line, None


def _put(body: bytes) -> bytes:
    return b"put 1024 0 60 %d\r\n" % len(body) + body + b"\r\n"


class BeanstalkdClient(Client):
    async def connect(self, role: str) -> None:
        self.conn = await self._open()
        self.using = "default"
        self._task: asyncio.Task[None] | None = None
        self._stop = False

    async def _open(self) -> _Conn:
        _t, conn = await asyncio.get_running_loop().create_connection(_Conn, "127.0.0.1", self.args["port"])
        return conn

    async def prepare(self, topic: str, queues: int | None = None, groups: list[str] | None = None) -> None:
        if groups:
            _FANOUT[topic] = [f"{topic}.{g}" for g in groups]

    async def stored_count(self, topic: str) -> int | None:
        total = 0
        for tube in _FANOUT.get(topic) or [topic]:
            ((line, data),) = await self.conn.call(b"stats-tube %s\r\n" % tube.encode(), 1)
            if not line.startswith(b"OK"):
                continue  # NOT_FOUND: a tube nobody put into
            for row in (data or b"").decode().splitlines():
                key, _, value = row.partition(":")
                if key.strip() in ("current-jobs-ready", "current-jobs-reserved"):
                    total += int(value)
        return total

    async def publish(self, topic: str, body: bytes) -> None:
        tubes = _FANOUT.get(topic) or (topic,)
        parts, n = [], 0
        for tube in tubes:
            if tube != self.using:  # the connection's tube is state: switch in the same pipelined write
                parts.append(b"use %s\r\n" % tube.encode())
                self.using = tube
                n += 1
            parts.append(_put(body))
            n += 1
        for line, _ in await self.conn.call(b"".join(parts), n):
            if not (line.startswith(b"INSERTED") or line.startswith(b"USING")):
                raise BeanstalkError(line.decode(errors="replace"))

    async def subscribe(self, topic: str, group: str, on_bodies: OnBodies, m: Membership = SOLO) -> None:
        tube = f"{topic}.{group}" if m.fanout else topic
        conn = await self._open()
        self._sub_conn = conn
        self._stop = False
        for line, _ in await conn.call(b"watch %s\r\nignore default\r\n" % tube.encode(), 2):
            if not line.startswith(b"WATCHING"):
                raise BeanstalkError(line.decode(errors="replace"))

        async def loop() -> None:
            deletes: list[bytes] = []
            want = 1
            while True:
                if self._stop:  # acknowledge what was handed to the listener, then stop
                    if deletes:
                        await conn.call(b"".join(deletes), len(deletes))
                    return
                # one reserve that waits for a job, the rest take what is ready now; the previous round's
                # jobs are deleted in the same write
                cmds = b"reserve-with-timeout 1\r\n" + b"reserve-with-timeout 0\r\n" * (want - 1)
                replies = await conn.call(b"".join(deletes) + cmds, len(deletes) + want)
                deletes = []
                bodies = []
                for line, data in replies:
                    if line.startswith(b"RESERVED"):
                        deletes.append(b"delete %s\r\n" % line.split(b" ", 2)[1])
                        bodies.append(data)
                    elif line.startswith((b"DELETED", b"TIMED_OUT", b"DEADLINE_SOON")):
                        continue
                    else:
                        raise BeanstalkError(line.decode(errors="replace"))
                if bodies:
                    on_bodies(bodies)
                want = max(1, min(ROUND_MAX, 2 * len(bodies)))

        self._task = asyncio.get_running_loop().create_task(loop())

    async def unsubscribe(self) -> None:
        if self._task is not None:
            self._stop = True
            done, _ = await asyncio.wait([self._task], timeout=5.0)  # a waiting reserve ends within 1 s
            if not done:
                self._task.cancel()
            self._task = None
        conn = getattr(self, "_sub_conn", None)
        if conn is not None and conn.transport is not None:
            conn.transport.close()
            self._sub_conn = None

    async def close(self) -> None:
        await self.unsubscribe()
        if self.conn.transport is not None:
            self.conn.transport.close()


SERVER = BeanstalkdServer
CLIENT = BeanstalkdClient
