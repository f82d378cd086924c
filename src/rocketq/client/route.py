"""Topic route data as the client uses it: publish info (writable master queues), subscribe queues,
queue selection and the latency fault tolerance of the producer."""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from .message import MessageQueue

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
MASTER_ID = "0"

_BARE_INT_KEY = re.compile(rb"([{,])\s*(-?\d+)\s*:")


def loads_lenient(body: bytes) -> Any:
    """JSON from a RocketMQ server; old fastjson writes integer map keys unquoted ({0:"ip:port"})."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return orjson.loads(_BARE_INT_KEY.sub(rb'\1"\2":', body))


@dataclass(slots=True)
class BrokerData:
    broker_name: str
    cluster: str
    broker_addrs: dict[str, str]  # brokerId (string) -> "ip:port"


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(slots=True)
class TopicRouteData:
    broker_datas: list[BrokerData]
    queue_datas: list[QueueData]
    order_topic_conf: str | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TopicRouteData:
        bds = [
            BrokerData(
                str(b.get("brokerName", "")),
                str(b.get("cluster", "")),
                {str(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()},
            )
            for b in obj.get("brokerDatas") or []
        ]
        qds = [
            QueueData(
                str(q.get("brokerName", "")),
                int(q.get("readQueueNums", 0)),
                int(q.get("writeQueueNums", 0)),
                int(q.get("perm", 6)),
                int(q.get("topicSysFlag", 0)),
            )
            for q in obj.get("queueDatas") or []
        ]
        return cls(bds, qds, obj.get("orderTopicConf"))

    def signature(self) -> tuple[Any, ...]:
        return (
            tuple(sorted((b.broker_name, tuple(sorted(b.broker_addrs.items()))) for b in self.broker_datas)),
            tuple(
                sorted(
                    (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in self.queue_datas
                )
            ),
            self.order_topic_conf,
        )


@dataclass(slots=True)
class TopicPublishInfo:
    order_topic: bool = False
    queues: list[MessageQueue] = field(default_factory=list)
    route: TopicRouteData | None = None
    _index: int = field(default_factory=lambda: random.randrange(1 << 16))

    def ok(self) -> bool:
        return bool(self.queues)

    def next_queue(self) -> MessageQueue:
        self._index += 1
        return self.queues[self._index % len(self.queues)]

    def select_one(self, last_broker_name: str | None) -> MessageQueue:
        """Round robin, avoiding the broker of the previous failed attempt when possible."""
        if last_broker_name is None:
            return self.next_queue()
        for _ in range(len(self.queues)):
            mq = self.next_queue()
            if mq.broker_name != last_broker_name:
                return mq
        return self.next_queue()


def topic_route_to_publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    info = TopicPublishInfo(route=route)
    if route.order_topic_conf:
        # "brokerA:4;brokerB:4": ordered topics use exactly these queues
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.isdigit():
                info.queues.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
        info.order_topic = True
        return info
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            info.queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return info


def topic_route_to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    out: set[MessageQueue] = set()
    for qd in route.queue_datas:
        if qd.perm & PERM_READ:
            out.update(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return out


# -- latency fault tolerance (MQFaultStrategy) --------------------------------------------------------------
LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS = 30000
_FIRST_PENALTY_MS = next(lat for lat, d in zip(LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS, strict=True) if d)


class LatencyFaultTolerance:
    """After a send to a broker took long (or failed), skip that broker for the matching duration."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[int, float]] = {}  # broker -> (latency ms, available at monotonic s)

    @staticmethod
    def not_available_duration_ms(latency_ms: int) -> int:
        if latency_ms < _FIRST_PENALTY_MS:  # every successful fast send: skip the table walk
            return 0
        for i in range(len(LATENCY_MAX_MS) - 1, -1, -1):
            if latency_ms >= LATENCY_MAX_MS[i]:
                return NOT_AVAILABLE_DURATION_MS[i]
        return 0

    def update(self, broker_name: str, latency_ms: int, isolation: bool) -> None:
        lat = ISOLATION_LATENCY_MS if isolation else latency_ms
        duration = self.not_available_duration_ms(lat)
        self._items[broker_name] = (lat, time.monotonic() + duration / 1000.0)

    def is_available(self, broker_name: str) -> bool:
        item = self._items.get(broker_name)
        return item is None or time.monotonic() >= item[1]

    def remove(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)

    def pick_one_at_least(self) -> str | None:
        """The least bad broker: lowest latency, then earliest available."""
        if not self._items:
            return None
        return min(self._items.items(), key=lambda kv: (kv[1][1], kv[1][0]))[0]

    def select(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        # a retry avoids the previous broker unless it is the only one
        avoid = last_broker_name if last_broker_name is not None and len(self._brokers(info)) > 1 else None
        for _ in range(len(info.queues)):
            mq = info.next_queue()
            if mq.broker_name != avoid and self.is_available(mq.broker_name):
                return mq
        best = self.pick_one_at_least()
        if best is not None:
            candidates = [q for q in info.queues if q.broker_name == best]
            if candidates:
                return candidates[info.next_queue().queue_id % len(candidates)]
            self.remove(best)
        return info.select_one(last_broker_name)

    @staticmethod
    def _brokers(info: TopicPublishInfo) -> set[str]:
        return {q.broker_name for q in info.queues}
