# Over 600 lines: mirrors DefaultMQAdminExt's one wide class; a split by area (like cmd_*.py) is planned.
"""AdminClient: the operations behind mqadmin (RocketMQ's DefaultMQAdminExt), over the raw remoting client.

Async core (``async with AdminClient("127.0.0.1:9876") as admin: await admin.topic_route("T")``); the console
and other tools can reuse it directly, or through :class:`rocketq.admin.sync.MQAdminExt` from threads.

Bodies are plain dicts parsed leniently (fastjson's object map keys become dicts, see ``mq_of``), so this
module only depends on protocol/ and remoting/.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from rocketq.protocol import headers as H
from rocketq.protocol.bodies import SubscriptionGroupConfig
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient, RemotingError

from .console_ops import ConsoleOps
from .errors import AdminError, NamesrvUnreachableError, TopicNotFoundError
from .records import StoredMessage, decode_offset_msg_id, decode_records, encode_properties
from .wire import QueueConsumeStats, loads, mq_of

TOOLS_CONSUMER = "TOOLS_CONSUMER"
SELF_TEST_PRODUCER = "SELF_TEST_P_GROUP"
DEFAULT_TOPIC = "TBW102"
MASTER_ID = "0"
PULL_SYSFLAG_SUBSCRIPTION = 4
PERM_READ = 4
PERM_WRITE = 2


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(slots=True)
class QueueOffsets:
    topic: str
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass(slots=True)
class PullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[StoredMessage]

    @property
    def found(self) -> bool:
        return self.code == ResponseCode.SUCCESS


@dataclass(slots=True)
class SendResult:
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    offset_msg_id: str
    status: str = "SEND_OK"


_uniq_counter = random.randrange(0, 1 << 16)


def new_uniq_key() -> str:
    """A Java MessageClientIDSetter-style id: ip + pid + hash + ms since month start + counter."""
    global _uniq_counter
    _uniq_counter = (_uniq_counter + 1) & 0xFFFF
    try:
        ip = socket.inet_aton("127.0.0.1")
    except OSError:  # pragma: no cover
        ip = b"\x7f\0\0\1"
    now = time.time()
    lt = time.localtime(now)
    month_start = time.mktime((lt.tm_year, lt.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    since = int((now - month_start) * 1000) & 0x7FFFFFFF
    raw = ip + struct.pack(">hii", os.getpid() & 0x7FFF, id(TOOLS_CONSUMER) & 0x7FFFFFFF, since)
    return (raw + struct.pack(">H", _uniq_counter)).hex().upper()


class AdminClient(ConsoleOps):
    """Talks to the NameServer(s) and brokers. ``namesrv`` is ``"host:port[;host:port]"`` or a list."""

    def __init__(self, namesrv: str | Iterable[str], *, timeout_s: float = 5.0, rpc_hook: Any = None) -> None:
        if isinstance(namesrv, str):
            addrs = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
        else:
            addrs = [a.strip() for a in namesrv if a.strip()]
        if not addrs:
            raise AdminError("no NameServer address: pass -n HOST:PORT or set NAMESRV_ADDR")
        self.namesrv_addrs = addrs
        self.timeout_s = timeout_s
        self._remoting = RemotingClient(rpc_hook)

    async def close(self) -> None:
        await self._remoting.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transport -----------------------------------------------------------------------------------------
    async def invoke_namesrv(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        errors: list[str] = []
        for addr in self.namesrv_addrs:
            try:
                return await self._remoting.invoke(
                    addr, RemotingCommand.request(code, ext, body), self.timeout_s
                )
            except RemotingError as exc:
                errors.append(str(exc))
        raise NamesrvUnreachableError("NameServer unreachable: " + "; ".join(errors))

    async def invoke_broker(
        self,
        addr: str,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        try:
            return await self._remoting.invoke(
                addr, RemotingCommand.request(code, ext, body), timeout_s or self.timeout_s
            )
        except RemotingError as exc:
            raise AdminError(f"broker {addr}: {exc}") from None

    @staticmethod
    def check(
        resp: RemotingCommand, what: str, ok: Iterable[int] = (ResponseCode.SUCCESS,)
    ) -> RemotingCommand:
        if resp.code not in tuple(ok):
            try:
                name = ResponseCode(resp.code).name
            except ValueError:
                name = str(resp.code)
            raise AdminError(
                f"{what} failed: {name} ({resp.code}) {resp.remark or ''}".rstrip(), resp.code, resp.remark
            )
        return resp

    # -- NameServer ----------------------------------------------------------------------------------------
    async def topic_route(self, topic: str) -> dict[str, Any]:
        resp = await self.invoke_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, H.GetRouteInfoRequestHeader(topic=topic).to_ext()
        )
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFoundError(
                f"topic {topic!r} does not exist: {resp.remark or 'no route info'}", resp.code
            )
        self.check(resp, f"topicRoute {topic}")
        route = loads(resp.body_bytes)
        route.setdefault("brokerDatas", [])
        route.setdefault("queueDatas", [])
        return route

    async def cluster_info(self) -> dict[str, Any]:
        resp = self.check(await self.invoke_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO), "clusterList")
        info = loads(resp.body_bytes)
        info.setdefault("brokerAddrTable", {})
        info.setdefault("clusterAddrTable", {})
        return info

    async def topic_list(self) -> list[str]:
        resp = self.check(
            await self.invoke_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), "topicList"
        )
        return sorted(loads(resp.body_bytes).get("topicList") or [])

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        resp = await self.invoke_namesrv(
            RequestCode.GET_TOPICS_BY_CLUSTER, H.GetTopicsByClusterRequestHeader(cluster=cluster).to_ext()
        )
        self.check(resp, f"topics of cluster {cluster}")
        return sorted(loads(resp.body_bytes).get("topicList") or [])

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None = None) -> None:
        for addr in self.namesrv_addrs:
            req = RemotingCommand.request(
                RequestCode.DELETE_TOPIC_IN_NAMESRV,
                H.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext(),
            )
            try:
                resp = await self._remoting.invoke(addr, req, self.timeout_s)
            except RemotingError as exc:
                raise NamesrvUnreachableError(f"NameServer {addr} unreachable: {exc}") from None
            self.check(resp, f"delete topic {topic} in NameServer {addr}")

    # -- addressing ----------------------------------------------------------------------------------------
    async def _broker_addr_sets(self, cluster: str | None) -> dict[str, dict[Any, str]]:
        """brokerName -> {brokerId: address}, for one cluster (error if unknown) or all of them."""
        info = await self.cluster_info()
        table = info["brokerAddrTable"]
        if cluster is not None:
            names = info["clusterAddrTable"].get(cluster)
            if names is None:
                raise AdminError(
                    f"cluster {cluster!r} not found (known: {', '.join(info['clusterAddrTable']) or 'none'})"
                )
        else:
            names = list(table)
        return {name: (table.get(name) or {}).get("brokerAddrs") or {} for name in sorted(names)}

    async def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """brokerName -> master address, for one cluster (error if unknown) or all of them."""
        out: dict[str, str] = {}
        for name, addrs in (await self._broker_addr_sets(cluster)).items():
            master = addrs.get(MASTER_ID, addrs.get(0))
            if master:
                out[name] = master
        return out

    async def broker_addrs(self, cluster: str | None = None) -> list[str]:
        """Every broker address, masters and slaves, of one cluster (error if unknown) or of all of them."""
        sets = await self._broker_addr_sets(cluster)
        return [
            addr for addrs in sets.values() for _, addr in sorted(addrs.items(), key=lambda kv: str(kv[0]))
        ]

    async def broker_name_of(self, addr: str) -> str:
        info = await self.cluster_info()
        for name, data in info["brokerAddrTable"].items():
            if addr in (data.get("brokerAddrs") or {}).values():
                return name
        return addr

    @staticmethod
    def route_masters(route: dict[str, Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for bd in route.get("brokerDatas") or []:
            addrs = bd.get("brokerAddrs") or {}
            master = addrs.get(MASTER_ID, addrs.get(0))
            if master:
                out[bd["brokerName"]] = master
        return out

    async def topic_queues(self, topic: str, *, writable: bool = False) -> list[tuple[str, str, int]]:
        """[(brokerName, masterAddr, queueId)] of the topic's readable (or writable) queues."""
        route = await self.topic_route(topic)
        masters = self.route_masters(route)
        out: list[tuple[str, str, int]] = []
        for qd in sorted(route["queueDatas"], key=lambda q: q["brokerName"]):
            name = qd["brokerName"]
            if name not in masters:
                continue
            perm = int(qd.get("perm", 6))
            if writable:
                if not perm & PERM_WRITE:
                    continue
                n = int(qd.get("writeQueueNums", 0))
            else:
                if not perm & PERM_READ:
                    continue
                n = int(qd.get("readQueueNums", 0))
            out.extend((name, masters[name], q) for q in range(n))
        return out

    # -- topics --------------------------------------------------------------------------------------------
    async def create_topic(self, broker_addr: str, cfg: TopicConfig, attributes: str | None = None) -> None:
        """``attributes``: 5.x attribute changes ("+message.type=FIFO,-key")."""
        ext = H.CreateTopicRequestHeader(
            topic=cfg.topic_name,
            default_topic=DEFAULT_TOPIC,
            read_queue_nums=cfg.read_queue_nums,
            write_queue_nums=cfg.write_queue_nums,
            perm=cfg.perm,
            topic_filter_type=cfg.topic_filter_type,
            topic_sys_flag=cfg.topic_sys_flag,
            order=cfg.order,
        ).to_ext()
        if attributes:
            ext["attributes"] = attributes
        resp = await self.invoke_broker(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        self.check(resp, f"create topic {cfg.topic_name} on {broker_addr}")

    async def wait_route(self, cfg: TopicConfig, broker_names: Iterable[str], timeout_s: float = 5.0) -> bool:
        """Wait until the NameServer's route shows ``cfg`` on every broker (brokers re-register after a
        topic change; a client started right after updateTopic needs the route). False on timeout."""
        want = set(broker_names)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                route = await self.topic_route(cfg.topic_name)
            except TopicNotFoundError:
                route = {"queueDatas": []}
            seen = {
                qd.get("brokerName")
                for qd in route["queueDatas"]
                if int(qd.get("writeQueueNums", -1)) == cfg.write_queue_nums
                and int(qd.get("readQueueNums", -1)) == cfg.read_queue_nums
                and int(qd.get("perm", -1)) == cfg.perm
            }
            if want <= seen:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    async def delete_topic_in_broker(self, broker_addr: str, topic: str) -> None:
        resp = await self.invoke_broker(
            broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER, H.DeleteTopicRequestHeader(topic=topic).to_ext()
        )
        self.check(resp, f"delete topic {topic} on {broker_addr}")

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """Delete in every master of the cluster, then in the NameServers. Returns the brokers touched."""
        masters = await self.master_addrs(cluster)
        for addr in masters.values():
            await self.delete_topic_in_broker(addr, topic)
        await self.delete_topic_in_namesrv(topic, cluster)
        return list(masters.values())

    async def topic_stats(self, topic: str) -> list[QueueOffsets]:
        route = await self.topic_route(topic)
        rows: list[QueueOffsets] = []
        for name, addr in sorted(self.route_masters(route).items()):
            resp = await self.invoke_broker(
                addr, RequestCode.GET_TOPIC_STATS_INFO, H.GetTopicStatsInfoRequestHeader(topic=topic).to_ext()
            )
            self.check(resp, f"topicStatus {topic} on {name}")
            table = loads(resp.body_bytes).get("offsetTable") or {}
            for key, off in table.items():
                t, b, q = mq_of(key)
                rows.append(
                    QueueOffsets(
                        t,
                        b or name,
                        q,
                        int(off.get("minOffset", 0)),
                        int(off.get("maxOffset", 0)),
                        int(off.get("lastUpdateTimestamp", 0)),
                    )
                )
        rows.sort(key=lambda r: (r.broker_name, r.queue_id))
        return rows

    # -- brokers -------------------------------------------------------------------------------------------
    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        resp = await self.invoke_broker(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        self.check(resp, f"brokerStatus {broker_addr}")
        return {str(k): str(v) for k, v in (loads(resp.body_bytes).get("table") or {}).items()}

    async def ha_status(self, broker_addr: str) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS (907): RocketMQ 5's HARuntimeInfo."""
        resp = await self.invoke_broker(broker_addr, RequestCode.GET_BROKER_HA_STATUS)
        self.check(resp, f"haStatus {broker_addr}")
        return loads(resp.body_bytes)

    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        resp = await self.invoke_broker(
            addr,
            RequestCode.GET_MAX_OFFSET,
            H.GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id).to_ext(),
        )
        return int(self.check(resp, "getMaxOffset").ext_fields.get("offset", 0))

    async def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        resp = await self.invoke_broker(
            addr,
            RequestCode.GET_MIN_OFFSET,
            H.GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id).to_ext(),
        )
        return int(self.check(resp, "getMinOffset").ext_fields.get("offset", 0))

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        resp = await self.invoke_broker(
            addr,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            H.SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp).to_ext(),
        )
        return int(self.check(resp, "searchOffset").ext_fields.get("offset", 0))

    # -- messages ------------------------------------------------------------------------------------------
    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
        producer_group: str = SELF_TEST_PRODUCER,
        properties: dict[str, str] | None = None,
        flag: int = 0,
    ) -> SendResult:
        """Send one message. ``properties``: more properties (user or system ones such as RETRY_TOPIC)."""
        queues = await self.topic_queues(topic, writable=True)
        if broker_name is not None:
            queues = [q for q in queues if q[0] == broker_name]
            if not queues:
                raise AdminError(f"broker {broker_name!r} has no writable queue of topic {topic!r}")
        if queue_id is not None:
            queues = [q for q in queues if q[2] == queue_id]
            if not queues:
                raise AdminError(f"topic {topic!r} has no writable queue {queue_id}")
        if not queues:
            raise AdminError(f"topic {topic!r} has no writable queue")
        name, addr, qid = random.choice(queues)
        uniq = new_uniq_key()
        props: dict[str, str] = dict(properties or {})
        if keys:
            props["KEYS"] = keys
        if tags:
            props["TAGS"] = tags
        props["WAIT"] = "true"
        props["UNIQ_KEY"] = uniq
        ext = H.SendMessageRequestHeaderV2(
            a=producer_group,
            b=topic,
            c=DEFAULT_TOPIC,
            d=4,
            e=qid,
            f=flag,
            g=int(time.time() * 1000),
            h=0,
            i=encode_properties(props),
            j=0,
            k=False,
            m=False,
        ).to_ext()
        resp = await self.invoke_broker(addr, RequestCode.SEND_MESSAGE_V2, ext, body)
        self.check(
            resp,
            f"send to {topic} on {name}",
            ok=(
                ResponseCode.SUCCESS,
                ResponseCode.FLUSH_DISK_TIMEOUT,
                ResponseCode.FLUSH_SLAVE_TIMEOUT,
                ResponseCode.SLAVE_NOT_AVAILABLE,
            ),
        )
        status = {
            ResponseCode.SUCCESS: "SEND_OK",
            ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
            ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
            ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
        }[ResponseCode(resp.code)]
        h = resp.ext_fields
        return SendResult(
            name,
            int(h.get("queueId", qid)),
            int(h.get("queueOffset", -1)),
            uniq,
            h.get("msgId", ""),
            status,
        )

    async def view_message(self, offset_msg_id: str) -> StoredMessage:
        try:
            addr, offset = decode_offset_msg_id(offset_msg_id)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
        resp = await self.invoke_broker(
            addr, RequestCode.VIEW_MESSAGE_BY_ID, H.ViewMessageRequestHeader(offset=offset).to_ext()
        )
        self.check(resp, f"queryMsgById {offset_msg_id}")
        msgs = decode_records(resp.body_bytes)
        if not msgs:
            raise AdminError(f"message {offset_msg_id} not found (undecodable body)")
        msg = msgs[0]
        msg.broker_name = await self.broker_name_of(addr)
        return msg

    async def query_message(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 64,
        begin: int = 0,
        end: int | None = None,
        unique_key: bool = False,
    ) -> list[StoredMessage]:
        route = await self.topic_route(topic)
        end = int(time.time() * 1000) + 60_000 if end is None else end
        found: list[StoredMessage] = []
        for name, addr in sorted(self.route_masters(route).items()):
            ext = H.QueryMessageRequestHeader(
                topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
            ).to_ext()
            if unique_key:
                ext["_UNIQUE_KEY_QUERY"] = "true"
            resp = await self.invoke_broker(addr, RequestCode.QUERY_MESSAGE, ext)
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            self.check(resp, f"queryMsgByKey {topic} {key} on {name}")
            for m in decode_records(resp.body_bytes):
                m.broker_name = name
                wanted = (
                    m.properties.get("UNIQ_KEY") == key if unique_key else key in (m.keys or "").split(" ")
                )
                if wanted and m.topic == topic:
                    found.append(m)
        found.sort(key=lambda m: (m.store_timestamp, m.broker_name, m.queue_id, m.queue_offset))
        return found

    async def pull(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_nums: int = 32,
        sub_expression: str = "*",
        group: str = TOOLS_CONSUMER,
        broker_name: str = "",
    ) -> PullResult:
        ext = H.PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PULL_SYSFLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=sub_expression,
            sub_version=0,
            expression_type="TAG",
        ).to_ext()
        resp = await self.invoke_broker(addr, RequestCode.PULL_MESSAGE, ext)
        self.check(
            resp,
            f"pull {topic}:{queue_id}@{offset}",
            ok=(
                ResponseCode.SUCCESS,
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                ResponseCode.PULL_OFFSET_MOVED,
            ),
        )
        h = resp.ext_fields
        msgs = decode_records(resp.body_bytes) if resp.code == ResponseCode.SUCCESS else []
        if sub_expression.strip() not in ("", "*"):
            wanted = {t.strip() for t in sub_expression.split("||")}
            msgs = [m for m in msgs if m.tags in wanted]
        for m in msgs:
            m.broker_name = broker_name
        return PullResult(
            resp.code,
            int(h.get("nextBeginOffset", offset)),
            int(h.get("minOffset", 0)),
            int(h.get("maxOffset", 0)),
            msgs,
        )

    # -- consumers -----------------------------------------------------------------------------------------
    async def consume_stats(
        self, group: str, topic: str | None = None
    ) -> tuple[list[QueueConsumeStats], float]:
        """Per-queue broker/consumer offsets of a group over every master broker, and the summed TPS."""
        progress = await self.group_progress(group, topic)
        rows = progress.rows
        if not progress.answered and progress.errors:
            raise progress.errors[-1]
        if not rows:  # as RocketMQ's admin: an empty offset table is an error, not an empty report
            raise AdminError(
                f"no consume stats for group {group!r}"
                + (f" on topic {topic!r}" if topic else "")
                + ": it has not consumed (committed an offset) yet",
                ResponseCode.CONSUMER_NOT_ONLINE,
            )
        return rows, progress.tps

    async def consumer_connection(self, group: str) -> dict[str, Any]:
        masters = await self.master_addrs()
        last: AdminError | None = None
        for name, addr in masters.items():
            resp = await self.invoke_broker(
                addr,
                RequestCode.GET_CONSUMER_CONNECTION_LIST,
                H.GetConsumerConnectionListRequestHeader(consumer_group=group).to_ext(),
            )
            if resp.code == ResponseCode.SUCCESS:
                conn = loads(resp.body_bytes)
                conn.setdefault("connectionSet", [])
                conn.setdefault("subscriptionTable", {})
                return conn
            try:
                self.check(resp, f"consumerConnection {group} on {name}")
            except AdminError as exc:
                last = exc
        if last is not None:
            raise last
        raise AdminError("no broker in the cluster")

    async def create_subscription_group(
        self, broker_addr: str, cfg: SubscriptionGroupConfig, extra: dict[str, Any] | None = None
    ) -> None:
        """``extra``: more SubscriptionGroupConfig fields (e.g. 5.x consumeMessageOrderly)."""
        body = {**cfg.to_obj(), **(extra or {})}
        resp = await self.invoke_broker(
            broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, orjson.dumps(body)
        )
        self.check(resp, f"updateSubGroup {cfg.group_name} on {broker_addr}")

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        ext = H.UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
        ).to_ext()
        resp = await self.invoke_broker(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        self.check(resp, f"update offset of {group} {topic}:{queue_id}")

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp: int, force: bool = True
    ) -> dict[tuple[str, str, int], int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on every master of the topic: {(topic, broker, qid): new offset}.

        Raises AdminError with code CONSUMER_NOT_ONLINE (206) when nobody of the group is connected; the
        caller may then use :meth:`reset_offset_by_time_offline`.
        """
        route = await self.topic_route(topic)
        out: dict[tuple[str, str, int], int] = {}
        for name, addr in sorted(self.route_masters(route).items()):
            ext = H.ResetOffsetRequestHeader(
                topic=topic, group=group, timestamp=timestamp, is_force=force
            ).to_ext()
            resp = await self.invoke_broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            self.check(resp, f"resetOffsetByTime {group} {topic} on {name}")
            for key, off in (loads(resp.body_bytes).get("offsetTable") or {}).items():
                t, b, q = mq_of(key)
                out[(t, b or name, q)] = int(off)
        return out

    async def reset_offset_by_time_offline(
        self, group: str, topic: str, timestamp: int, force: bool = True
    ) -> list[tuple[QueueConsumeStats, int, int]]:
        """The old way (no consumer online): search each queue's offset and store it as the group's offset.

        Returns [(stats before, offset for the timestamp, offset set)]."""
        rows, _ = await self.consume_stats(group, topic)
        masters = await self.master_addrs()
        out: list[tuple[QueueConsumeStats, int, int]] = []
        for r in rows:
            if r.topic != topic or r.broker_name not in masters:
                continue
            addr = masters[r.broker_name]
            ts_offset = await self.search_offset(addr, topic, r.queue_id, timestamp)
            new = ts_offset if force or ts_offset < r.consumer_offset else r.consumer_offset
            await self.update_consumer_offset(addr, group, topic, r.queue_id, new)
            out.append((r, ts_offset, new))
        return out

    async def subscription_groups(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """groupName -> SubscriptionGroupConfig (as JSON) of one broker."""
        resp = await self.invoke_broker(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        body = loads(self.check(resp, f"subscription groups of {broker_addr}").body_bytes)
        table = body.get("subscriptionGroupTable", body) if isinstance(body, dict) else {}
        return {str(k): v for k, v in table.items() if isinstance(v, dict)}

    async def delete_subscription_group(self, broker_addr: str, group: str) -> None:
        ext = H.DeleteSubscriptionGroupRequestHeader(group_name=group).to_ext()
        resp = await self.invoke_broker(broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)
        self.check(resp, f"delete subscription group {group} on {broker_addr}")

    async def topic_configs(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """topicName -> TopicConfig (as JSON) of one broker (GET_ALL_TOPIC_CONFIG)."""
        resp = await self.invoke_broker(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        body = loads(self.check(resp, f"topic configs of {broker_addr}").body_bytes)
        table = body.get("topicConfigTable", {}) if isinstance(body, dict) else {}
        return {str(k): v for k, v in table.items() if isinstance(v, dict)}

    async def topic_consumer_groups(self, topic: str) -> list[str]:
        """Groups that consume the topic (QUERY_TOPIC_CONSUME_BY_WHO on each of its masters)."""
        route = await self.topic_route(topic)
        groups: set[str] = set()
        for name, addr in self.route_masters(route).items():
            ext = H.QueryTopicConsumeByWhoRequestHeader(topic=topic).to_ext()
            resp = await self.invoke_broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, ext)
            self.check(resp, f"groups consuming {topic} on {name}")
            groups.update(loads(resp.body_bytes).get("groupList") or [])
        return sorted(groups)

    async def producer_connection(self, group: str, topic: str) -> list[dict[str, Any]]:
        """Connections of a producer group, asked from the masters serving ``topic``."""
        route = await self.topic_route(topic)
        conns: list[dict[str, Any]] = []
        last: AdminError | None = None
        for name, addr in self.route_masters(route).items():
            ext = H.GetProducerConnectionListRequestHeader(producer_group=group).to_ext()
            resp = await self.invoke_broker(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, ext)
            try:
                self.check(resp, f"producerConnection {group} on {name}")
            except AdminError as exc:
                last = exc
                continue
            conns.extend(loads(resp.body_bytes).get("connectionSet") or [])
        if not conns and last is not None:
            raise last
        return conns

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        resp = await self.invoke_broker(broker_addr, RequestCode.GET_BROKER_CONFIG)
        text = self.check(resp, f"broker config of {broker_addr}").body_bytes.decode("utf-8", "replace")
        out: dict[str, str] = {}
        for line in text.splitlines():
            k, sep, v = line.partition("=")
            if sep and k.strip() and not k.lstrip().startswith("#"):
                out[k.strip()] = v.strip()
        return out

    async def update_broker_config(self, broker_addr: str, changes: dict[str, str]) -> str | None:
        """UPDATE_BROKER_CONFIG: the broker applies the keys at once and saves them into its broker.conf.
        Returns the broker's remark (set when it applied the change but could not save it), else None."""
        body = "".join(f"{k}={v}\n" for k, v in changes.items()).encode()
        resp = await self.invoke_broker(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)
        return self.check(resp, f"update broker config of {broker_addr}").remark or None

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        ext = H.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext()
        for addr in self.namesrv_addrs:
            req = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, ext)
            try:
                resp = await self._remoting.invoke(addr, req, self.timeout_s)
            except RemotingError as exc:
                raise NamesrvUnreachableError(f"NameServer {addr} unreachable: {exc}") from None
            self.check(resp, f"put kv config on {addr}")

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        ext = H.GetKVConfigRequestHeader(namespace=namespace, key=key).to_ext()
        resp = await self.invoke_namesrv(RequestCode.GET_KV_CONFIG, ext)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return self.check(resp, "get kv config").ext_fields.get("value")

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        ext = H.DeleteKVConfigRequestHeader(namespace=namespace, key=key).to_ext()
        for addr in self.namesrv_addrs:
            req = RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, ext)
            try:
                resp = await self._remoting.invoke(addr, req, self.timeout_s)
            except RemotingError as exc:
                raise NamesrvUnreachableError(f"NameServer {addr} unreachable: {exc}") from None
            self.check(resp, f"delete kv config on {addr}")

    async def resend_message(self, offset_msg_id: str, topic: str | None = None) -> SendResult:
        """Send a stored message again (e.g. out of a DLQ) to ``topic`` or the topic it was first sent to."""
        msg = await self.view_message(offset_msg_id)
        target = topic or msg.properties.get("RETRY_TOPIC") or msg.properties.get("REAL_TOPIC") or msg.topic
        return await self.send_message(target, msg.body, tags=msg.tags, keys=msg.keys)

    # -- misc ----------------------------------------------------------------------------------------------
    async def gather(self, *aws: Any) -> list[Any]:
        return list(await asyncio.gather(*aws))
