"""RabbitMQ (apt rabbitmq-server): durable classic queue, persistent messages, publisher confirms
(tier A only; RabbitMQ confirms a persistent message once it is fsynced). Every listener on loopback:
AMQP, epmd (ERL_EPMD_ADDRESS) and Erlang distribution; fresh MNESIA/LOG base per run.
Client: aio-pika; the consumer uses prefetch 256 and acks every 32nd delivery with multiple=True."""

from __future__ import annotations

import os
from typing import Any

from .base import SOLO, Client, Membership, OnBodies, PortServer
from .common import free_port

RABBIT = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class RabbitServer(PortServer):
    name = "rabbitmq"
    tiers = ("A",)
    start_timeout_s = 60.0

    def prepare(self) -> None:
        super().prepare()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        for d in ("mnesia", "log", "home"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        with open(os.path.join(self.root, "enabled_plugins"), "w") as f:
            f.write("[].\n")
        with open(os.path.join(self.root, "rabbitmq.conf"), "w") as f:
            f.write(f"listeners.tcp.1 = 127.0.0.1:{self.port}\nloopback_users = none\n")

    def command(self) -> list[str]:
        return [RABBIT]

    def env(self) -> dict[str, str]:
        e = dict(os.environ)
        r = self.root
        e.update(
            HOME=os.path.join(r, "home"),
            RABBITMQ_MNESIA_BASE=os.path.join(r, "mnesia"),
            RABBITMQ_LOG_BASE=os.path.join(r, "log"),
            RABBITMQ_NODENAME=f"rqbench{self.port}@localhost",
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
            ERL_EPMD_PORT=str(self.epmd_port),
            RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(r, "enabled_plugins"),
            RABBITMQ_CONFIG_FILE=os.path.join(r, "rabbitmq"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        )
        return e

    def start(self) -> float:
        took = super().start()
        # epmd daemonizes out of the tree: remember it so cleanup() can end it (by pid)
        for pid in _epmd_pids(self.epmd_port):
            if pid not in self.extra_pids:
                self.extra_pids.append(pid)
        return took

    def data_dir(self) -> str:
        return os.path.join(self.root, "mnesia")

    def client_args(self) -> dict[str, Any]:
        return {"url": f"amqp://guest:guest@127.0.0.1:{self.port}/"}


def _epmd_pids(port: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            if b"epmd" not in cmd:
                continue
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"ERL_EPMD_PORT={port}".encode() in env:
            out.append(int(d))
    return out


class RabbitClient(Client):
    async def connect(self, role: str) -> None:
        import aio_pika

        self._aio_pika = aio_pika
        self.conn = await aio_pika.connect(self.args["url"])
        self.channel = await self.conn.channel(publisher_confirms=True)
        self.exchange = self.channel.default_exchange
        self._fanout: dict[str, Any] = {}  # topic -> its fanout exchange
        self._consumer: Any = None

    async def prepare(self, topic: str, queues: int | None = None, groups: list[str] | None = None) -> None:
        if not groups:
            await self.channel.declare_queue(topic, durable=True)
            return
        # fan-out: a durable fanout exchange with one durable queue per group, bound before publishing
        ex = await self.channel.declare_exchange(topic, self._aio_pika.ExchangeType.FANOUT, durable=True)
        for g in groups:
            q = await self.channel.declare_queue(f"{topic}.{g}", durable=True)
            await q.bind(ex)
        self._fanout[topic] = ex

    async def publish(self, topic: str, body: bytes) -> None:
        ap = self._aio_pika
        ex = self._fanout.get(topic)
        await (ex or self.exchange).publish(
            ap.Message(body, delivery_mode=ap.DeliveryMode.PERSISTENT),
            routing_key="" if ex else topic,
            mandatory=False,
        )

    async def subscribe(self, topic: str, group: str, on_bodies: OnBodies, m: Membership = SOLO) -> None:
        # competing members consume one queue; a fan-out group its own queue behind the exchange
        ch = await self.conn.channel()
        await ch.set_qos(prefetch_count=256)
        q = await ch.declare_queue(f"{topic}.{group}" if m.fanout else topic, durable=True)
        count = 0

        async def on_message(message: Any) -> None:
            nonlocal count
            on_bodies([message.body])
            count += 1
            if count % 32 == 0:
                await message.ack(multiple=True)

        self._ch = ch
        self._queue = q
        self._consumer = await q.consume(on_message)

    async def unsubscribe(self) -> None:
        if self._consumer is not None:
            await self._queue.cancel(self._consumer)
            await self._ch.close()
            self._consumer = None

    async def close(self) -> None:
        await self.unsubscribe()
        await self.conn.close()


SERVER = RabbitServer
CLIENT = RabbitClient
