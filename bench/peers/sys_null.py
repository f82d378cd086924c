"""A null broker: acknowledges every publish at once and stores nothing. Driving it measures the load
generator's own ceiling (client model + loopback), which bounds every system's figures in this bench.
Frames: 4-byte big-endian length + body from the client; one byte back per frame."""

from __future__ import annotations

import asyncio
import collections
import os
import struct

from .base import Client, PortServer, python

_LEN = struct.Struct(">I")  # the same framing as limits.py's null-server


class NullServer(PortServer):
    name = "null"
    tiers = ("-",)

    def command(self) -> list[str]:
        limits = os.path.join(os.path.dirname(os.path.abspath(__file__)), "limits.py")
        return [python(), limits, "null-server", str(self.port), "86400"]


class NullClient(Client):
    async def connect(self, role: str) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.args["port"])
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._acks = asyncio.get_running_loop().create_task(self._read_acks())

    async def _read_acks(self) -> None:
        while True:
            data = await self.reader.read(65536)
            if not data:
                return
            for _ in range(len(data)):
                self.waiters.popleft().set_result(None)

    async def publish(self, topic: str, body: bytes) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self.writer.write(_LEN.pack(len(body)) + body)
        await fut

    async def close(self) -> None:
        self._acks.cancel()
        self.writer.close()


SERVER = NullServer
CLIENT = NullClient
