"""Blocking access to NameServers and Brokers for the Spark connector (driver and Python workers).

The connector runs in Spark's Python processes, which are synchronous: every call here submits one
coroutine to the process-wide rocketq client loop (rocketq.client.sync) and waits. Calls that touch many
queues are gathered into one round so planning a micro-batch over 100 queues costs one network round, not 100.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from rocketq.client.api import MQClientAPI
from rocketq.client.route import TopicRouteData, loads_lenient
from rocketq.client.sync import run
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

PERM_READ = 4
PERM_WRITE = 2

# a queue is (topic, brokerName, queueId)
Queue = tuple[str, str, int]


class RocketMQSourceError(RuntimeError):
    pass


@dataclass(slots=True)
class PullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes | memoryview | None


def _is_system_topic(t: str) -> bool:
    return t.startswith(("%RETRY%", "%DLQ%", "RMQ_SYS_", "SCHEDULE_TOPIC")) or t in (
        "TBW102",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    )


class BrokerIO:
    """One per process and name-server list (see ``get_io``); opens connections lazily."""

    def __init__(self, namesrv: str, timeout_s: float = 3.0) -> None:
        self.namesrv = [a.strip() for a in re.split(r"[;,]", namesrv) if a.strip()]
        self.timeout_s = timeout_s
        self._remoting: RemotingClient | None = None
        self._api: MQClientAPI | None = None
        self.routes: dict[str, TopicRouteData] = {}

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def api(self) -> MQClientAPI:
        if self._api is None:
            self._remoting = RemotingClient()
            self._api = MQClientAPI(self._remoting, self.namesrv, self.timeout_s)
        return self._api

    @property
    def remoting(self) -> RemotingClient:
        self.api  # noqa: B018 - creates the client
        assert self._remoting is not None
        return self._remoting

    def call(self, coro: Any, timeout: float | None = None) -> Any:
        return run(coro, timeout)

    # -- routes --------------------------------------------------------------------------------
    async def _route(self, topic: str, refresh: bool = False) -> TopicRouteData | None:
        r = None if refresh else self.routes.get(topic)
        if r is None:
            r = await self.api.get_topic_route(topic)
            if r is not None:
                self.routes[topic] = r
        return r

    async def broker_addr(self, topic: str, broker: str) -> str:
        for refresh in (False, True):
            r = await self._route(topic, refresh)
            if r is None:
                continue
            for bd in r.broker_datas:
                if bd.broker_name == broker and "0" in bd.broker_addrs:
                    return bd.broker_addrs["0"]
        raise RocketMQSourceError(f"no master address for broker {broker!r} of topic {topic!r}")

    def list_topics(self) -> list[str]:
        async def go() -> list[str]:
            resp = await self.api.invoke_namesrv(
                lambda: RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
            )
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                return []
            return [str(t) for t in loads_lenient(resp.body_bytes).get("topicList") or []]

        return sorted(t for t in self.call(go()) if not _is_system_topic(t))

    def missing_topics(self, topics: Iterable[str]) -> list[str]:
        """The topics no NameServer has a route for."""

        async def go() -> list[str]:
            names = sorted(set(topics))
            routes = await asyncio.gather(*(self._route(t, True) for t in names))
            return [t for t, r in zip(names, routes, strict=True) if r is None]

        return self.call(go())

    def read_queues(self, topics: Iterable[str]) -> list[Queue]:
        """Every readable queue of the topics (refreshing routes, so new queues show up)."""

        async def go() -> list[Queue]:
            topics_l = list(topics)
            routes = await asyncio.gather(*(self._route(t, True) for t in topics_l))
            out: list[Queue] = []
            for t, r in zip(topics_l, routes, strict=True):
                if r is None:
                    continue
                masters = {b.broker_name for b in r.broker_datas if "0" in b.broker_addrs}
                for q in r.queue_datas:
                    if q.perm & PERM_READ and q.broker_name in masters:
                        out.extend((t, q.broker_name, i) for i in range(q.read_queue_nums))
            return sorted(out)

        return self.call(go())

    def write_queues(self, topic: str) -> list[Queue]:
        async def go() -> list[Queue]:
            r = await self._route(topic, True)
            if r is None:
                raise RocketMQSourceError(f"topic {topic!r} has no route on {self.namesrv}")
            masters = {b.broker_name for b in r.broker_datas if "0" in b.broker_addrs}
            out = [
                (topic, q.broker_name, i)
                for q in r.queue_datas
                if q.perm & PERM_WRITE and q.broker_name in masters
                for i in range(q.write_queue_nums)
            ]
            return sorted(out)

        return self.call(go())

    # -- offsets -------------------------------------------------------------------------------
    async def _offset(self, code: int, q: Queue, extra: dict[str, str] | None = None) -> int:
        addr = await self.broker_addr(q[0], q[1])
        ext = {"topic": q[0], "queueId": str(q[2]), **(extra or {})}
        resp = await self.api.invoke(addr, RemotingCommand.request(code, ext))
        if resp.code != ResponseCode.SUCCESS:
            raise RocketMQSourceError(f"{RequestCode(code).name} {q}: {resp.code} {resp.remark}")
        return int(resp.ext_fields.get("offset", 0))

    def _many(self, code: int, queues: Sequence[Queue], extra: Any = None) -> dict[Queue, int]:
        async def go() -> list[int]:
            return await asyncio.gather(
                *(self._offset(code, q, extra(q) if callable(extra) else extra) for q in queues)
            )

        return dict(zip(queues, self.call(go()), strict=True)) if queues else {}

    def max_offsets(self, queues: Sequence[Queue]) -> dict[Queue, int]:
        return self._many(RequestCode.GET_MAX_OFFSET, queues)

    def min_offsets(self, queues: Sequence[Queue]) -> dict[Queue, int]:
        return self._many(RequestCode.GET_MIN_OFFSET, queues)

    def offsets_by_time(self, queues: Sequence[Queue], ts_ms: Any) -> dict[Queue, int]:
        """First offset stored at/after the timestamp (max offset if none); ts_ms: int or queue -> int."""
        return self._many(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            queues,
            lambda q: {"timestamp": str(ts_ms(q) if callable(ts_ms) else ts_ms)},
        )

    def group_offsets(self, group: str, queues: Sequence[Queue]) -> dict[Queue, int]:
        """-1 where the group has no committed offset."""

        async def one(q: Queue) -> int:
            addr = await self.broker_addr(q[0], q[1])
            ext = {"consumerGroup": group, "topic": q[0], "queueId": str(q[2])}
            resp = await self.api.invoke(
                addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext)
            )
            if resp.code != ResponseCode.SUCCESS:
                return -1
            return int(resp.ext_fields.get("offset", -1))

        async def go() -> list[int]:
            return await asyncio.gather(*(one(q) for q in queues))

        return dict(zip(queues, self.call(go()), strict=True)) if queues else {}

    def publish_group_offsets(self, group: str, offsets: dict[Queue, int]) -> None:
        """UPDATE_CONSUMER_OFFSET (awaited, not oneway, so the broker has it when we return)."""

        async def one(q: Queue, off: int) -> None:
            addr = await self.broker_addr(q[0], q[1])
            ext = {"consumerGroup": group, "topic": q[0], "queueId": str(q[2]), "commitOffset": str(off)}
            await self.api.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))

        async def go() -> None:
            await asyncio.gather(*(one(q, o) for q, o in offsets.items()))

        if offsets:
            self.call(go())

    # -- pull ----------------------------------------------------------------------------------
    async def pull(
        self, group: str, q: Queue, offset: int, max_nums: int, sub: str, timeout_s: float
    ) -> PullResult:
        addr = await self.broker_addr(q[0], q[1])
        ext = {
            "consumerGroup": group,
            "topic": q[0],
            "queueId": str(q[2]),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_nums),
            "sysFlag": "20",  # SUBSCRIPTION | LITE_PULL: this request's expression, never commit, never hold
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": sub,
            "subVersion": "0",
            "expressionType": "TAG",
        }
        resp = await self.api.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), timeout_s)
        h = resp.ext_fields
        if resp.code not in (0, 19, 20, 21):
            raise RocketMQSourceError(f"pull {q}@{offset}: {resp.code} {resp.remark}")
        return PullResult(
            resp.code,
            int(h.get("nextBeginOffset", offset)),
            int(h.get("minOffset", 0)),
            int(h.get("maxOffset", 0)),
            resp.body if resp.code == 0 else None,
        )

    # -- send (sink) ---------------------------------------------------------------------------
    async def invoke_broker(self, topic: str, broker: str, request: RemotingCommand, timeout_s: float):
        addr = await self.broker_addr(topic, broker)
        return await self.api.invoke(addr, request, timeout_s)

    async def invoke_addr(self, addr: str, request: RemotingCommand, timeout_s: float):
        return await self.api.invoke(addr, request, timeout_s)


_IO: dict[tuple[str, float], BrokerIO] = {}


def get_io(namesrv: str, timeout_s: float = 3.0) -> BrokerIO:
    """Process-wide cache: Python workers are reused across tasks, so are their connections."""
    key = (namesrv, timeout_s)
    io = _IO.get(key)
    if io is None:
        io = _IO[key] = BrokerIO(namesrv, timeout_s)
    return io


def dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()
