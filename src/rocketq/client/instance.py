"""MQClientInstance: the per-process client shared by producers and consumers of one NameServer list
and instance name. Owns the connections, the route table, heartbeats, rebalance and offset persistence."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson

from rocketq.protocol import lenient_json
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import Channel, RemotingClient

from .acl import AclClientRPCHook
from .api import MQClientAPI
from .codec import SYSFLAG_COMPRESSED, decode_records, decompress_body, local_ip_str, string_to_properties
from .message import DEFAULT_TOPIC, MessageExt, MessageQueue, MQClientError
from .route import MASTER_ID, TopicRouteData, topic_route_to_publish_info, topic_route_to_subscribe_info

log = logging.getLogger(__name__)

DEFAULT_INSTANCE_NAME = "DEFAULT"
NO_SUCH_GROUP = "The Consumer Group not exist in this consumer"


class ProducerInner(Protocol):
    group: str

    def publish_topics(self) -> Sequence[str]: ...
    def update_publish_info(self, topic: str, route: TopicRouteData) -> None: ...


class ConsumerInner(Protocol):
    group: str

    def subscribed_topics(self) -> Sequence[str]: ...
    def update_subscribe_info(self, topic: str, mqs: set[Any]) -> None: ...
    def consumer_data(self) -> dict[str, Any]: ...
    async def do_rebalance(self) -> None: ...
    async def persist_consumer_offset(self) -> None: ...


class InnerProducer(Protocol):
    """A producer the client makes for its own use (CLIENT_INNER_PRODUCER, the message-trace producer)."""

    async def start(self) -> None: ...
    async def shutdown(self) -> None: ...
    async def send(self, msgs: Any) -> Any: ...


# Makes a client/producer.Producer. producer.py imports this module, so this module never imports it: the
# package's __init__ (which imports both) installs the factory with set_producer_factory.
_producer_factory: Callable[..., InnerProducer] | None = None


def set_producer_factory(factory: Callable[..., InnerProducer]) -> None:
    global _producer_factory
    _producer_factory = factory


class ClientConfig:
    """Timing knobs of the shared instance (RocketMQ's ClientConfig names, in seconds)."""

    def __init__(
        self,
        poll_name_server_interval: float = 30.0,
        heartbeat_broker_interval: float = 30.0,
        persist_consumer_offset_interval: float = 5.0,
        rebalance_interval: float = 20.0,
        mq_client_api_timeout: float = 3.0,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
        check_crc: bool = True,
    ) -> None:
        self.poll_name_server_interval = poll_name_server_interval
        self.heartbeat_broker_interval = heartbeat_broker_interval
        self.persist_consumer_offset_interval = persist_consumer_offset_interval
        self.rebalance_interval = rebalance_interval
        self.mq_client_api_timeout = mq_client_api_timeout
        # ACL credentials (SessionCredentials): every request is signed when set
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token
        # verify each pulled message's body against its BODYCRC and leave out those that fail (RocketMQ's
        # MessageDecoder checkCRC; 5.x clients discard a corrupted message the same way)
        self.check_crc = check_crc


def parse_namesrv(namesrv: str | Sequence[str] | None) -> list[str]:
    if namesrv is None:
        namesrv = os.environ.get("NAMESRV_ADDR") or os.environ.get("ROCKETQ_NAMESRV") or "127.0.0.1:9876"
    parts = namesrv.replace(",", ";").split(";") if isinstance(namesrv, str) else list(namesrv)
    addrs = [p.strip() for p in parts if p.strip()]
    if not addrs:
        raise MQClientError(-1, "no NameServer address")
    return addrs


class MQClientInstance:
    def __init__(
        self, namesrv_addrs: list[str], instance_name: str, config: ClientConfig | None = None
    ) -> None:
        self.config = config or ClientConfig()
        self.instance_name = instance_name
        ip = local_ip_str()
        pid = os.getpid()
        # like buildMQClientId: ip@instanceName, the DEFAULT instance named after the pid; a named instance
        # keeps its id across restarts (so a broadcasting consumer finds its offsets file again)
        self.client_id = f"{ip}@{pid}" if instance_name == DEFAULT_INSTANCE_NAME else f"{ip}@{instance_name}"
        self.namesrv_addrs = namesrv_addrs
        hook = None
        if self.config.access_key and self.config.secret_key:
            hook = AclClientRPCHook(
                self.config.access_key, self.config.secret_key, self.config.security_token
            )
        self.remoting = RemotingClient(hook)
        self.remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        self.remoting.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self.remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        self.remoting.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_directly)
        self.remoting.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_reply)
        self._replies: dict[str, asyncio.Future[Any]] = {}
        self.heartbeat_addrs: set[str] = set()
        self.api = MQClientAPI(self.remoting, namesrv_addrs, self.config.mq_client_api_timeout)
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[str, str]] = {}
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self._route_lock = asyncio.Lock()
        self._heartbeat_lock = asyncio.Lock()
        self._rebalance_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._aux: set[asyncio.Task[Any]] = set()
        self._started = False
        self._inner_producer: Any = None
        self.key: tuple[Any, ...] = ()
        self.loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._tasks = [
            asyncio.create_task(self._every(self.config.poll_name_server_interval, self.update_all_routes)),
            asyncio.create_task(self._every(self.config.heartbeat_broker_interval, self.send_heartbeat_all)),
            asyncio.create_task(
                self._every(self.config.persist_consumer_offset_interval, self.persist_all_offsets)
            ),
            asyncio.create_task(self._rebalance_loop()),
        ]

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        for t in [*self._tasks, *self._aux]:
            t.cancel()
        await asyncio.gather(*self._tasks, *self._aux, return_exceptions=True)
        self._tasks = []
        if self._inner_producer is not None:
            with contextlib.suppress(Exception):
                await self._inner_producer.shutdown()
            self._inner_producer = None
        await self.remoting.close()
        if _INSTANCES.get(self.key) is self:
            del _INSTANCES[self.key]

    @property
    def idle(self) -> bool:
        return not self.producers and not self.consumers

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._aux.add(task)
        task.add_done_callback(self._aux.discard)

    async def _every(self, interval: float, fn: Any) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("%s failed: %s", getattr(fn, "__name__", fn), exc)

    # -- registration ----------------------------------------------------------------------------
    def register_producer(self, group: str, producer: ProducerInner) -> bool:
        if group in self.producers:
            return False
        self.producers[group] = producer
        return True

    def register_consumer(self, group: str, consumer: ConsumerInner) -> bool:
        if group in self.consumers:
            return False
        self.consumers[group] = consumer
        return True

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(group, None)

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(None, group)

    async def _unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        addrs = {a for addrs in self.broker_addrs.values() for a in addrs.values()}

        async def one(addr: str) -> None:
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
            except Exception as exc:
                log.debug("unregister client at %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in addrs))

    def new_producer(self, group: str, **options: Any) -> InnerProducer:
        """A producer of ``group`` sharing this instance (not started yet)."""
        if _producer_factory is None:  # only before rocketq.client's __init__ has run
            raise RuntimeError("rocketq.client.instance used before rocketq.client was imported")
        return _producer_factory(group, namesrv=self.namesrv_addrs, _instance=self, **options)

    async def inner_producer(self) -> Any:
        """CLIENT_INNER_PRODUCER: re-sends consumed messages to %RETRY% when CONSUMER_SEND_MSG_BACK fails."""
        if self._inner_producer is None:
            p = self.new_producer("CLIENT_INNER_PRODUCER")
            await p.start()
            self._inner_producer = p
        return self._inner_producer

    # -- routes ----------------------------------------------------------------------------------
    async def update_all_routes(self) -> None:
        topics: set[str] = set()
        for p in list(self.producers.values()):
            topics.update(p.publish_topics())
        for c in list(self.consumers.values()):
            topics.update(c.subscribed_topics())
        for t in topics:
            try:
                await self.update_topic_route(t)
            except Exception as exc:
                log.debug("route update for %s failed: %s", t, exc)
        # cleanOfflineBroker: forget brokers no route mentions any more (no heartbeats to them)
        live = {bd.broker_name for t, r in self.routes.items() if t in topics for bd in r.broker_datas}
        for name in [n for n in self.broker_addrs if n not in live]:
            for addr in self.broker_addrs.pop(name).values():
                self.heartbeat_addrs.discard(addr)
                self.remoting.close_channel(addr)

    async def update_topic_route(
        self, topic: str, *, use_default: bool = False, default_queue_nums: int = 4
    ) -> bool:
        """Fetch the route of ``topic`` (or, with ``use_default``, derive it from TBW102) and push it to
        every producer and consumer. Returns whether a route exists."""
        async with self._route_lock:
            if use_default:
                route = await self.api.get_topic_route(DEFAULT_TOPIC)
                if route is not None:
                    for qd in route.queue_datas:
                        n = min(default_queue_nums, qd.read_queue_nums)
                        qd.read_queue_nums = qd.write_queue_nums = n
            else:
                route = await self.api.get_topic_route(topic)
            if route is None:
                return False
            old = self.routes.get(topic)
            changed = old is None or old.signature() != route.signature()
            new_broker = False
            for bd in route.broker_datas:
                if self.broker_addrs.get(bd.broker_name) != bd.broker_addrs:
                    new_broker = True
                self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
            if new_broker and self._started and not self.idle:
                # a broker we have not talked to yet must learn our groups before it serves us
                self._spawn(self.send_heartbeat_all())
            if changed or use_default:
                self.routes[topic] = route
            for p in list(self.producers.values()):
                p.update_publish_info(topic, route)
            subs = topic_route_to_subscribe_info(topic, route)
            for c in list(self.consumers.values()):
                if topic in c.subscribed_topics():
                    c.update_subscribe_info(topic, subs)
            return True

    def publish_info_from(self, topic: str, route: TopicRouteData) -> Any:
        return topic_route_to_publish_info(topic, route)

    def find_broker_addr(self, broker_name: str, only_master: bool = True) -> str | None:
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        master = addrs.get(MASTER_ID)
        if master or only_master:
            return master
        return next(iter(addrs.values()), None)

    def find_broker_addr_by_id(self, broker_name: str, broker_id: int) -> str | None:
        addrs = self.broker_addrs.get(broker_name)
        return addrs.get(str(broker_id)) if addrs else None

    async def find_broker_addr_or_refresh(
        self, broker_name: str, topic: str, only_master: bool = True
    ) -> str:
        addr = self.find_broker_addr(broker_name, only_master)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.find_broker_addr(broker_name, only_master)
        if addr is None:
            raise MQClientError(-1, f"The broker[{broker_name}] not exist")
        return addr

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        route = self.routes.get(topic)
        if route is None:
            await self.update_topic_route(topic)
            route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            return []
        bds = list(route.broker_datas)
        random.shuffle(bds)
        last: Exception | None = None
        for bd in bds:
            addr = bd.broker_addrs.get(MASTER_ID) or next(iter(bd.broker_addrs.values()), None)
            if addr is None:
                continue
            try:
                return await self.api.get_consumer_id_list(addr, group)
            except Exception as exc:
                last = exc
        if last is not None:
            log.debug("get consumer list of %s failed: %s", group, last)
        return []

    # -- heartbeat -------------------------------------------------------------------------------
    def heartbeat_data(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "producerDataSet": [{"groupName": g} for g in self.producers],
            "consumerDataSet": [c.consumer_data() for c in list(self.consumers.values())],
        }

    async def send_heartbeat_all(self) -> None:
        if self.idle:
            return
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            only_masters = not data["consumerDataSet"]
            addrs = set()
            for addrs_by_id in self.broker_addrs.values():
                for bid, addr in addrs_by_id.items():
                    if only_masters and bid != MASTER_ID:
                        continue
                    addrs.add(addr)

            async def one(addr: str) -> None:
                try:
                    await self.api.heartbeat(addr, data)
                except Exception as exc:
                    log.debug("heartbeat to %s failed: %s", addr, exc)

            await asyncio.gather(*(one(a) for a in addrs))
            self.heartbeat_addrs |= addrs

    # -- consumers -------------------------------------------------------------------------------
    def _on_ids_changed(self, channel: Channel, request: RemotingCommand) -> None:
        log.debug("consumer ids of %s changed", request.ext_fields.get("consumerGroup"))
        self.rebalance_immediately()
        return None

    async def _on_reset_offset(self, channel: Channel, request: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (mqadmin resetOffsetByTime with the group online)."""
        group = request.ext_fields.get("group", "")
        topic = request.ext_fields.get("topic", "")
        consumer = self.consumers.get(group)
        if consumer is None or not request.body:
            return None
        try:
            table = lenient_json.loads(request.body_bytes).get("offsetTable") or {}
        except Exception as exc:
            log.warning("bad reset-offset body: %s", exc)
            return None
        offsets: dict[MessageQueue, int] = {}
        for key, off in table.items():
            obj = key.to_dict() if isinstance(key, lenient_json.FrozenKey) else key
            if isinstance(obj, str):
                obj = orjson.loads(obj)
            mq = MessageQueue.from_json(obj)
            if mq.topic == topic:
                offsets[mq] = int(off)
        reset = getattr(consumer, "reset_offset", None)
        if reset is not None and offsets:
            await reset(topic, offsets)
        return None

    def _on_running_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        consumer = self.consumers.get(request.ext_fields.get("consumerGroup", ""))
        if consumer is None or not hasattr(consumer, "running_info"):
            return request.response(
                ResponseCode.SYSTEM_ERROR, "The Consumer Group not exist in this consumer"
            )
        body = lenient_json.dumps(consumer.running_info())
        return request.response(ResponseCode.SUCCESS, None, None, body)

    async def _on_consume_directly(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        consumer = self.consumers.get(request.ext_fields.get("consumerGroup", ""))
        if consumer is None or not hasattr(consumer, "consume_directly"):
            return request.response(
                ResponseCode.SYSTEM_ERROR, "The Consumer Group not exist in this consumer"
            )
        msgs = decode_records(request.body_bytes, request.ext_fields.get("brokerName", ""))
        if not msgs:
            return request.response(ResponseCode.SYSTEM_ERROR, "no message in the request body")
        result = await consumer.consume_directly(msgs[0])
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps(result))

    async def on_check_transaction_state(self, channel: Channel, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE: route to the transaction producer of the message's PGROUP."""
        msgs = decode_records(request.body_bytes)
        group = msgs[0].properties.get("PGROUP", "") if msgs else ""
        producer = self.producers.get(group)
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            log.info("transaction check for unknown producer group %r", group)
            return None
        await check(channel, request)
        return None

    # -- request / reply -------------------------------------------------------------------------
    def all_broker_addrs(self) -> set[str]:
        return {a for addrs in self.broker_addrs.values() for a in addrs.values()}

    def expect_reply(self, correlation_id: str) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies[correlation_id] = fut
        return fut

    def forget_reply(self, correlation_id: str) -> None:
        self._replies.pop(correlation_id, None)

    def _on_reply(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: the reply to one of our requests (body = raw message body)."""
        ext = request.ext_fields
        props = string_to_properties(ext.get("properties", ""))
        body = request.body_bytes
        sys_flag = int(ext.get("sysFlag", "0") or 0)
        try:
            if sys_flag & SYSFLAG_COMPRESSED:
                body = decompress_body(body, sys_flag)
        except Exception as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad reply body: {exc}")
        msg = MessageExt(ext.get("topic", ""), body, props)
        msg.queue_id = int(ext.get("queueId", "0") or 0)
        msg.flag = int(ext.get("flag", "0") or 0)
        msg.sys_flag = sys_flag
        msg.born_timestamp = int(ext.get("bornTimestamp", "0") or 0)
        msg.store_timestamp = int(ext.get("storeTimestamp", "0") or 0)
        msg.born_host = ext.get("bornHost", "")
        msg.store_host = ext.get("storeHost", "")
        msg.reconsume_times = int(ext.get("reconsumeTimes", "0") or 0)
        msg.msg_id = props.get("UNIQ_KEY", "")
        fut = self._replies.get(props.get("CORRELATION_ID", ""))
        if fut is not None and not fut.done():
            fut.set_result(msg)
        else:
            log.info("reply %s arrived after its request timed out", props.get("CORRELATION_ID"))
        return request.response(ResponseCode.SUCCESS)

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def _rebalance_loop(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that lands as the event
            # fires (gh-86296), and this loop would then outlive shutdown's cancel + gather.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.rebalance_interval):
                    await self._rebalance_wakeup.wait()
            self._rebalance_wakeup.clear()
            await self.do_rebalance()

    async def do_rebalance(self) -> None:
        for c in list(self.consumers.values()):
            try:
                await c.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("rebalance of %s failed: %s", c.group, exc)

    async def persist_all_offsets(self) -> None:
        for c in list(self.consumers.values()):
            try:
                await c.persist_consumer_offset()
            except Exception as exc:
                log.debug("persist offsets of %s failed: %s", c.group, exc)


_INSTANCES: dict[tuple[Any, ...], MQClientInstance] = {}


def get_instance(
    namesrv_addrs: list[str], instance_name: str = DEFAULT_INSTANCE_NAME, config: ClientConfig | None = None
) -> MQClientInstance:
    """The shared instance for (NameServers, instance name) on the running event loop."""
    loop = asyncio.get_running_loop()
    key = (tuple(namesrv_addrs), instance_name, id(loop))
    inst = _INSTANCES.get(key)
    if inst is None or inst.loop is not loop:  # a dead loop's id may be reused
        inst = MQClientInstance(namesrv_addrs, instance_name, config)
        inst.key = key
        inst.loop = loop
        _INSTANCES[key] = inst
    return inst


def acquire_instance_for_group(
    namesrv_addrs: list[str],
    instance_name: str,
    group: str,
    kind: str,
    config: ClientConfig | None = None,
) -> MQClientInstance:
    """Like Java, one instance holds each group once. If the group is already taken in the named instance
    (several consumers of one group in one process), use a fresh instance name so each gets its own
    clientId."""
    inst = get_instance(namesrv_addrs, instance_name, config)
    table = inst.producers if kind == "producer" else inst.consumers
    n = 1
    while group in table:
        base = str(os.getpid()) if instance_name == DEFAULT_INSTANCE_NAME else instance_name
        inst = get_instance(namesrv_addrs, f"{base}#{n}", config)
        table = inst.producers if kind == "producer" else inst.consumers
        n += 1
    return inst


async def release_instance(inst: MQClientInstance) -> None:
    if inst.idle:
        await inst.shutdown()
