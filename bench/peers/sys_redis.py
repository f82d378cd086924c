"""Redis Streams (apt redis-server): AOF with appendfsync always (tier A) / everysec (tier B).
Client: redis.asyncio (+hiredis) XADD; the consumer XREADs the stream from 0, keeping its own position."""

from __future__ import annotations

import asyncio
import shutil

from .base import SOLO, Client, Membership, OnBodies, PortServer


class RedisServer(PortServer):
    name = "redis"

    def command(self) -> list[str]:
        fsync = "always" if self.tier == "A" else "everysec"
        return [
            shutil.which("redis-server") or "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            self.root,
            "--appendonly",
            "yes",
            "--appendfsync",
            fsync,
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
        ]


class RedisClient(Client):
    async def connect(self, role: str) -> None:
        import redis.asyncio as redis

        # one pooled client: concurrent commands use concurrent connections (redis-py's model)
        self.r = redis.Redis(host="127.0.0.1", port=self.args["port"], max_connections=512)
        await self.r.ping()
        self._task: asyncio.Task[None] | None = None

    async def stored_count(self, topic: str) -> int | None:
        return int(await self.r.xlen(topic))

    async def publish(self, topic: str, body: bytes) -> None:
        await self.r.xadd(topic, {"d": body})

    async def subscribe(self, topic: str, group: str, on_bodies: OnBodies, m: Membership = SOLO) -> None:
        self._stop = False
        if m.members > 1:
            await self._subscribe_group(topic, group, on_bodies, m.index)
            return

        async def loop() -> None:
            last: bytes | str = "0"
            while not self._stop:
                resp = await self.r.xread({topic: last}, count=512, block=200)
                for _key, entries in resp or ():
                    if entries:
                        last = entries[-1][0]
                        on_bodies([fields[b"d"] for _id, fields in entries])

        self._task = asyncio.get_running_loop().create_task(loop())

    async def _subscribe_group(self, topic: str, group: str, on_bodies: OnBodies, member: int) -> None:
        """Competing consumers: a Redis consumer group (XREADGROUP), each batch acknowledged with one XACK
        (at-least-once, as the other systems' groups). A lone consumer or a fan-out reader uses XREAD."""
        import redis

        try:
            await self.r.xgroup_create(topic, group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        name = f"c{member}"

        async def loop() -> None:
            while not self._stop:
                resp = await self.r.xreadgroup(group, name, {topic: ">"}, count=512, block=200)
                for _key, entries in resp or ():
                    if entries:
                        on_bodies([fields[b"d"] for _id, fields in entries])
                        await self.r.xack(topic, group, *(i for i, _f in entries))

        self._task = asyncio.get_running_loop().create_task(loop())

    async def unsubscribe(self) -> None:
        # redis-py may swallow a cancellation inside a blocking read: stop by flag, cancel as a fallback
        if self._task is not None:
            self._stop = True
            done, _ = await asyncio.wait([self._task], timeout=2.0)
            if not done:
                self._task.cancel()
            self._task = None

    async def close(self) -> None:
        await self.unsubscribe()
        await self.r.aclose()


SERVER = RedisServer
CLIENT = RedisClient
