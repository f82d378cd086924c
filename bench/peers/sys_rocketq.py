"""rocketq: `rocketq standalone` (NameServer + Broker in one process); tier A SYNC_FLUSH, tier B ASYNC_FLUSH.
Client: rocketq.aio Producer (send / batch send) and PushConsumer with a coroutine listener."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from .base import SOLO, Client, Membership, OnBodies, Server, python
from .common import free_port

QUEUES = 4
# RocketMQ's defaults are 32 messages / 256 KiB per pull, whatever the consumer's pullBatchSize asks for
PULL_BATCH_CONF = "maxTransferCountOnMessageInMemory=256\nmaxTransferBytesOnMessageInMemory=1048576\n"
# The bench shares its disk with whatever else the host holds: past 90 % used (RocketMQ's default guard) the
# broker would refuse every send, which no peer does, so the guards move to 99 %. Below 75 % used they change
# nothing.
DISK_GUARD = {
    "diskSpaceWarningLevelRatio": "99",
    "diskSpaceCleanForciblyRatio": "99",
    "diskMaxUsedSpaceRatio": "99",
}
DISK_GUARD_CONF = "".join(f"{k}={v}\n" for k, v in DISK_GUARD.items())
# RocketMQ's production store sizes (`rocketq standalone` alone sizes its store for a laptop)
PRODUCTION_SIZES_CONF = (
    "mappedFileSizeCommitLog=1073741824\nmappedFileSizeConsumeQueue=6000000\n"
    "maxHashSlotNum=5000000\nmaxIndexNum=20000000\n"
)


class RocketqServer(Server):
    name = "rocketq"

    def prepare(self) -> None:
        self.ns_port = free_port()
        self.broker_port = free_port()
        self.home = os.path.join(self.root, "home")
        flush = "SYNC_FLUSH" if self.tier == "A" else "ASYNC_FLUSH"
        self.conf = os.path.join(self.root, "broker.conf")
        with open(self.conf, "w") as f:
            f.write(
                f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\nflushDiskType={flush}\n"
                f"haListenPort={free_port()}\nautoCreateTopicEnable=false\n{PULL_BATCH_CONF}{DISK_GUARD_CONF}"
                f"{PRODUCTION_SIZES_CONF}"
            )
            # experiments only (A/B of a broker setting): extra broker.conf lines, ';'-separated
            for line in os.environ.get("ROCKETQ_BENCH_BROKER_CONF", "").split(";"):
                if line.strip():
                    f.write(line.strip() + "\n")

    def command(self) -> list[str]:
        return [
            python(),
            "-m",
            "rocketq.cli",
            "standalone",
            "--home",
            self.home,
            "--namesrv-port",
            str(self.ns_port),
            "--broker-port",
            str(self.broker_port),
            "-c",
            self.conf,
            "--log-level",
            "WARNING",
        ]

    @property
    def ready_port(self) -> int:
        return self.broker_port

    def data_dir(self) -> str:
        return self.home

    def client_args(self) -> dict[str, Any]:
        return {"namesrv": f"127.0.0.1:{self.ns_port}", "broker": f"127.0.0.1:{self.broker_port}"}


class RocketqClient(Client):
    supports_batch = True
    supports_auto_batch = True
    # 256 messages per pull and per listener call, like the peers' consumers (NATS fetch 256, RabbitMQ
    # prefetch 256, Redis XREAD COUNT 512); the broker lets a pull carry that many (PULL_BATCH_CONF)
    pull_batch_size = 256

    async def connect(self, role: str) -> None:
        from rocketq.aio import Message, Producer, SendStatus

        self._msg = Message
        self._ok = SendStatus.SEND_OK
        self.consumer: Any = None
        self.producer: Any = None
        self.auto_producer: Any = None
        if role != "producer":
            return
        self.producer = Producer(
            "bench_pg",
            namesrv=self.args["namesrv"],
            instance_name=f"bench-p{self.args.get('member', 0)}",  # a shape's producers: one client each
            send_msg_timeout=15000,
            compress_msg_body_over_howmuch=1 << 30,  # bodies are random: never compress (no peer does)
            auto_batch=bool(self.args.get("auto_batch")),  # an A/B of auto-batch (rocketq bench pair)
            **({"batch_max_bytes": self.args["batch_max_bytes"]} if self.args.get("batch_max_bytes") else {}),
        )
        await self.producer.start()
        # the auto-batch cells: another producer of the same client instance (one connection), auto_batch on
        self.auto_producer = Producer(
            "bench_pg_auto",
            namesrv=self.args["namesrv"],
            instance_name=f"bench-p{self.args.get('member', 0)}",
            send_msg_timeout=15000,
            compress_msg_body_over_howmuch=1 << 30,
            auto_batch=True,
        )
        await self.auto_producer.start()

    async def prepare(self, topic: str, queues: int | None = None, groups: list[str] | None = None) -> None:
        from rocketq.admin.client import AdminClient, TopicConfig

        cfg = TopicConfig(topic, queues or QUEUES, queues or QUEUES)
        async with AdminClient(self.args["namesrv"]) as admin:
            # the broker must have registered with the NameServer first
            for _ in range(100):
                masters = await admin.master_addrs()
                if masters:
                    break
                await asyncio.sleep(0.1)
            for addr in masters.values():
                await admin.create_topic(addr, cfg)
            await admin.wait_route(cfg, masters, 10.0)

    async def stored_count(self, topic: str) -> int | None:
        from rocketq.admin.client import AdminClient

        async with AdminClient(self.args["namesrv"]) as admin:
            return sum(r.max_offset - r.min_offset for r in await admin.topic_stats(topic))

    async def publish(self, topic: str, body: bytes) -> None:
        r = await self.producer.send(self._msg(topic, body))
        if r.status is not self._ok:
            raise RuntimeError(f"send status {r.status.name}")

    async def publish_auto(self, topic: str, body: bytes) -> None:
        r = await self.auto_producer.send(self._msg(topic, body))
        if r.status is not self._ok:
            raise RuntimeError(f"send status {r.status.name}")

    async def publish_batch(self, topic: str, bodies: list[bytes]) -> None:
        m = self._msg
        r = await self.producer.send([m(topic, b) for b in bodies])
        if r.status is not self._ok:
            raise RuntimeError(f"send status {r.status.name}")

    async def subscribe(self, topic: str, group: str, on_bodies: OnBodies, m: Membership = SOLO) -> None:
        from rocketq.aio import ConsumeFromWhere, ConsumeResult, PushConsumer

        c = PushConsumer(
            group,
            namesrv=self.args["namesrv"],
            instance_name=f"bench-c{m.index}",  # members of one group in one process: distinct client ids
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=self.pull_batch_size,
            consume_message_batch_max_size=self.pull_batch_size,
        )
        c.subscribe(topic, "*")

        async def listener(msgs: list[Any]) -> ConsumeResult:
            on_bodies([m.body for m in msgs])
            return ConsumeResult.SUCCESS

        c.register_listener(listener)
        await c.start()
        self.consumer = c
        self._shape = (topic, group, m.members, m.queues or QUEUES)  # the load generator settles next

    async def settle(self) -> None:
        """Until this consumer pulls exactly the queues the group's allocation over all ``members`` gives
        it (a rebalance after a member joined; before that two members may pull the same queue)."""
        c = self.consumer
        if c is None:
            return
        topic, group, members, queues = self._shape
        for _ in range(200):
            if members == 1:
                if len(c.assigned_queues()) >= queues:
                    return
            else:
                cids = sorted(set(await c.instance.find_consumer_id_list(topic, group) or ()))
                mqs = sorted(c._sub_info.get(topic) or ())
                if len(cids) == members and len(mqs) == queues:
                    want = set(c.allocate_strategy(group, c.client_id, mqs, cids))
                    if set(c.assigned_queues()) == want:
                        return
                    await c.do_rebalance()  # what the broker's group-change notice triggers
                    continue
            await asyncio.sleep(0.05)

    async def unsubscribe(self) -> None:
        if self.consumer is not None:
            await self.consumer.shutdown()
            self.consumer = None

    async def close(self) -> None:
        await self.unsubscribe()
        for p in (self.auto_producer, self.producer):
            if p is not None:
                await p.shutdown()


SERVER = RocketqServer
CLIENT = RocketqClient
