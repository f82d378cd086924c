"""Admin requests (mqadmin / console): topics, groups, stats, connections, runtime info, offset reset,
queue locks."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.protocol import lenient_json
from rocketq.protocol.codes import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    RequestCode,
    ResponseCode,
)
from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketq.protocol.route import TOPIC_FILTER_TYPES, DataVersion, TopicConfig
from rocketq.remoting import Channel

from .. import persist
from ..conf_file import persist_changes
from ..config import ConfigError
from ..javaprops import PropertiesError, parse_properties
from ..subscription_manager import parse_group_config
from ..validation import check_name, check_topic
from .client import parse_body

if TYPE_CHECKING:
    from ..context import BrokerContext

log = logging.getLogger(__name__)
FrozenKey = lenient_json.FrozenKey
LOCK_EXPIRE_S = 60.0
_MAX_CONFIG_UPDATE = 16 * 1024  # bytes of UPDATE_BROKER_CONFIG body
_ALL_PERM = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT


def mq_key(topic: str, broker_name: str, queue_id: int) -> FrozenKey:
    return FrozenKey.of({"brokerName": broker_name, "queueId": queue_id, "topic": topic})


class AdminProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        self.broker_name = ctl.cfg["brokerName"]
        # group -> (topic, broker, qid) -> (client_id, last_update)
        self.locks: dict[str, dict[tuple[str, str, int], tuple[str, float]]] = {}
        self.config_version = DataVersion(int(time.time() * 1000), 0)

    def register(self, server) -> None:
        r = server.register_processor
        C = RequestCode
        r(C.UPDATE_AND_CREATE_TOPIC, self.update_topic)
        r(C.DELETE_TOPIC_IN_BROKER, self.delete_topic)
        r(C.GET_ALL_TOPIC_CONFIG, self.all_topic_config)
        r(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_group)
        r(C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.all_groups)
        r(C.DELETE_SUBSCRIPTIONGROUP, self.delete_group)
        r(C.GET_TOPIC_STATS_INFO, self.topic_stats)
        r(C.GET_CONSUME_STATS, self.consume_stats)
        r(C.GET_CONSUMER_CONNECTION_LIST, self.consumer_connections)
        r(C.GET_PRODUCER_CONNECTION_LIST, self.producer_connections)
        r(C.GET_BROKER_RUNTIME_INFO, self.runtime_info)
        r(C.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset)
        r(C.QUERY_TOPIC_CONSUME_BY_WHO, self.consume_by_who)
        r(C.GET_ALL_CONSUMER_OFFSET, self.all_consumer_offsets)
        r(C.GET_ALL_DELAY_OFFSET, self.all_delay_offsets)
        r(C.LOCK_BATCH_MQ, self.lock_batch)
        r(C.UNLOCK_BATCH_MQ, self.unlock_batch)
        r(C.GET_BROKER_CONFIG, self.broker_config)
        r(C.UPDATE_BROKER_CONFIG, self.update_broker_config)

    # -- topics ------------------------------------------------------------------------------
    def update_topic(self, channel: Channel, request: RemotingCommand):
        h = CreateTopicRequestHeader.from_ext(request.ext_fields)
        reason = check_topic(h.topic)
        if reason is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, reason)
        if h.topic in self.ctl.topics.system_topics or h.topic == self.ctl.cfg["brokerClusterName"]:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The topic[{h.topic}] is conflict with system reserved words."
            )
        if not (0 < h.read_queue_nums <= 1024 and 0 < h.write_queue_nums <= 1024):
            return request.response(ResponseCode.SYSTEM_ERROR, "queue nums must be in 1..1024")
        if h.perm & ~_ALL_PERM:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad perm {h.perm}")
        filter_type = h.topic_filter_type if h.topic_filter_type in TOPIC_FILTER_TYPES else "SINGLE_TAG"
        tc = TopicConfig(
            h.topic,
            h.read_queue_nums,
            h.write_queue_nums,
            h.perm,
            filter_type,
            h.topic_sys_flag or 0,
            h.order,
        )
        self.ctl.topics.update(tc, notify=False)
        return self._registered(request)

    async def _registered(self, request: RemotingCommand) -> RemotingCommand:
        # answered once the change is in topics.json (RocketMQ persists the topic table before it answers)
        try:
            await self.ctl.topics.written()
        except OSError as e:
            return request.response(ResponseCode.SYSTEM_ERROR, f"topic config not persisted: {e}")
        await self.ctl.register_now()
        return request.response(ResponseCode.SUCCESS)

    def delete_topic(self, channel: Channel, request: RemotingCommand):
        h = DeleteTopicRequestHeader.from_ext(request.ext_fields)
        reason = check_topic(h.topic)
        if reason is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, reason)
        ctl = self.ctl
        ctl.topics.delete(h.topic, notify=False)
        ctl.offsets.remove_topic(h.topic)
        ctl.offsets.persist()
        ctl.store.delete_topics({h.topic})
        return self._registered(request)

    def all_topic_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, None, None, self.ctl.topics.wrapper().encode())

    # -- groups ------------------------------------------------------------------------------
    def update_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            obj = parse_body(request.body_bytes)
            sgc = parse_group_config(obj if isinstance(obj, dict) else {})
        except (ProtocolError, ValueError, TypeError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {exc}")
        reason = check_name("group", sgc.group_name)
        if reason is None and not 0 <= sgc.retry_queue_nums <= 1024:
            reason = "retryQueueNums must be in 0..1024"
        if reason is None and not 0 <= sgc.retry_max_times <= 10_000:
            reason = "retryMaxTimes must be in 0..10000"
        if reason is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, reason)
        self.ctl.subscriptions.update(sgc)
        return request.response(ResponseCode.SUCCESS)

    def all_groups(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(
            ResponseCode.SUCCESS, None, None, orjson.dumps(self.ctl.subscriptions.snapshot())
        )

    def delete_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("groupName") or ""
        self.ctl.subscriptions.delete(group)
        self.ctl.stats.forget_group(group)  # its traffic counters and pull offsets (metrics)
        return request.response(ResponseCode.SUCCESS)

    # -- stats -------------------------------------------------------------------------------
    def topic_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_ext(request.ext_fields)
        tc = self.ctl.topics.get(h.topic)
        if tc is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = self.ctl.store
        table: dict[Any, Any] = {}
        for qid in range(tc.write_queue_nums):
            max_off = store.get_max_offset_in_queue(h.topic, qid)
            last = store.get_message_store_timestamp(h.topic, qid, max_off - 1) if max_off > 0 else 0
            table[mq_key(h.topic, self.broker_name, qid)] = {
                "lastUpdateTimestamp": max(last, 0),
                "maxOffset": max_off,
                "minOffset": store.get_min_offset_in_queue(h.topic, qid),
            }
        return request.response(ResponseCode.SUCCESS, None, None, lenient_json.dumps({"offsetTable": table}))

    def consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext(request.ext_fields)
        ctl = self.ctl
        store = ctl.store
        topics = {h.topic} if h.topic else ctl.offsets.topics_of_group(h.consumer_group)
        cgi = ctl.clients.get_consumer_group(h.consumer_group)
        if not h.topic and cgi is not None:
            topics |= set(cgi.subscriptions)
        table: dict[Any, Any] = {}
        for topic in sorted(topics):
            tc = ctl.topics.get(topic)
            if tc is None:
                continue
            for qid in range(tc.read_queue_nums):
                broker_off = store.get_max_offset_in_queue(topic, qid)
                consumer_off = max(ctl.offsets.query(h.consumer_group, topic, qid), 0)
                last = 0
                if consumer_off > 0:
                    last = max(store.get_message_store_timestamp(topic, qid, consumer_off - 1), 0)
                table[mq_key(topic, self.broker_name, qid)] = {
                    "brokerOffset": broker_off,
                    "consumerOffset": consumer_off,
                    "lastTimestamp": last,
                }
        tps = round(ctl.stats.group_tps(h.consumer_group), 2)
        body = lenient_json.dumps({"consumeTps": tps, "offsetTable": table})
        return request.response(ResponseCode.SUCCESS, None, None, body)

    def consumer_connections(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup") or ""
        cgi = self.ctl.clients.get_consumer_group(group)
        if cgi is None or not cgi.channels:
            return request.response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        body = {
            "connectionSet": [c.to_connection() for c in cgi.channels.values()],
            "consumeFromWhere": cgi.consume_from_where,
            "consumeType": cgi.consume_type,
            "messageModel": cgi.message_model,
            "subscriptionTable": {t: sd.to_obj() for t, sd in cgi.subscriptions.items()},
        }
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))

    def producer_connections(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("producerGroup") or ""
        chans = self.ctl.clients.producers.get(group)
        if not chans:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = {"connectionSet": [c.to_connection() for c in chans.values()]}
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))

    def runtime_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ctl = self.ctl
        table: dict[str, str] = {}
        try:
            table.update({str(k): str(v) for k, v in ctl.store.runtime_info().items()})
        except Exception:
            pass
        table.update(ctl.stats.table())
        earliest = min(
            (t for t in (ctl.store.get_earliest_message_time(tc.topic_name, q)
                         for tc in list(ctl.topics.table.values())[:256] for q in range(tc.read_queue_nums))
             if t > 0),
            default=0,
        )  # fmt: skip
        table.update(
            {
                "earliestMessageTimeStamp": str(earliest),
                "pageCacheLockTimeMills": "0",
                "sendThreadPoolQueueSize": "0",
                "pullThreadPoolQueueSize": "0",
                "brokerVersionDesc": "V4_9_8",
                "brokerVersion": "409",
                "bootTimestamp": str(ctl.boot_timestamp),
                "brokerName": ctl.cfg["brokerName"],
                "brokerAddr": ctl.broker_addr,
                "scheduleMessageOffset": " ".join(
                    f"{lvl}:{off}" for lvl, off in sorted(ctl.schedule.offsets.items())
                )
                if ctl.schedule
                else "",
                "heldPullRequests": str(ctl.hold.held_count if ctl.hold else 0),
                "commitLogMaxOffset": str(getattr(ctl.store, "max_phy_offset", 0)),
                "commitLogMinOffset": str(getattr(ctl.store, "min_phy_offset", 0)),
            }
        )
        if ctl.replication is not None:
            table.update(ctl.replication.runtime_info())
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps({"table": table}))

    def broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        lines = self.ctl.cfg.listing()
        version = orjson.dumps(self.config_version.to_obj()).decode()
        return request.response(ResponseCode.SUCCESS, None, {"version": version}, "\n".join(lines).encode())

    async def update_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """Apply at once, then save into the broker.conf the broker was started with (if any), as RocketMQ
        does. A file that cannot be written does not undo the change: the answer says it was not saved."""
        body = request.body_bytes
        if len(body) > _MAX_CONFIG_UPDATE:  # it may end up in broker.conf: no megabyte region names
            remark = f"config update over {_MAX_CONFIG_UPDATE} bytes"
            return request.response(ResponseCode.SYSTEM_ERROR, remark)
        try:
            entries = parse_properties(body.decode("utf-8"))
            changes = {k: v for k, v, _ in entries}
            self.ctl.apply_config(changes)
        except (UnicodeDecodeError, PropertiesError, ConfigError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        self.config_version = self.config_version.next_version(int(time.time() * 1000))
        path = self.ctl.cfg.source
        if not path or not changes:
            return request.response(ResponseCode.SUCCESS)
        try:  # on the config thread: one rewrite of the file at a time, in the order asked
            await asyncio.wrap_future(persist.submit(persist_changes, path, changes))
        except (OSError, PropertiesError) as exc:
            log.warning("updateBrokerConfig: applied, but not saved to %s: %s", path, exc)
            return request.response(ResponseCode.SUCCESS, f"applied, but not saved to {path}: {exc}")
        return request.response(ResponseCode.SUCCESS)

    # -- offsets -----------------------------------------------------------------------------
    def reset_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        ctl = self.ctl
        tc = ctl.topics.get(h.topic)
        if tc is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"[reset-offset] topic[{h.topic}] not exist")
        table: dict[Any, int] = {}
        for qid in range(tc.write_queue_nums):
            current = ctl.offsets.query(h.group, h.topic, qid)
            if h.timestamp == -1:
                target = ctl.store.get_max_offset_in_queue(h.topic, qid)
            else:
                target = ctl.store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp)
            if not (h.is_force or current < 0 or target < current):
                target = current
            ctl.offsets.commit(h.group, h.topic, qid, target)
            table[mq_key(h.topic, self.broker_name, qid)] = target
        ctl.offsets.persist(force=True)
        body = lenient_json.dumps({"offsetTable": table})
        cgi = ctl.clients.get_consumer_group(h.group)
        if cgi is not None:
            ext = {
                "topic": h.topic,
                "group": h.group,
                "timestamp": str(h.timestamp),
                "isForce": str(h.is_force).lower(),
            }
            for info in list(cgi.channels.values()):
                try:
                    info.channel.invoke_oneway(
                        RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body)
                    )
                except Exception:
                    pass
        return request.response(ResponseCode.SUCCESS, None, None, body)

    def consume_by_who(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_fields.get("topic") or ""
        groups = self.ctl.clients.groups_subscribing(topic) | self.ctl.offsets.groups_of_topic(topic)
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps({"groupList": sorted(groups)}))

    def all_consumer_offsets(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps(self.ctl.offsets.snapshot()))

    def all_delay_offsets(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        snap = self.ctl.schedule.snapshot() if self.ctl.schedule else {"offsetTable": {}}
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps(snap))

    # -- queue locks (orderly consumers) -----------------------------------------------------
    def _lock_body(self, request: RemotingCommand) -> tuple[str, str, list[tuple[str, str, int]]]:
        obj = parse_body(request.body_bytes)
        if not isinstance(obj, dict):
            raise ProtocolError("lock body is not an object")
        mqs = []
        for mq in obj.get("mqSet") or ():
            if isinstance(mq, dict):
                mqs.append(
                    (str(mq.get("topic") or ""), str(mq.get("brokerName") or ""), int(mq.get("queueId") or 0))
                )
        return str(obj.get("consumerGroup") or ""), str(obj.get("clientId") or ""), mqs

    def lock_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs = self._lock_body(request)
        now = time.monotonic()
        table = self.locks.setdefault(group, {})
        ok = []
        for mq in mqs:
            holder = table.get(mq)
            if holder is None or holder[0] == client_id or now - holder[1] > LOCK_EXPIRE_S:
                table[mq] = (client_id, now)
                ok.append({"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]})
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps({"lockOKMQSet": ok}))

    def unlock_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs = self._lock_body(request)
        table = self.locks.get(group, {})
        for mq in mqs:
            holder = table.get(mq)
            if holder is not None and holder[0] == client_id:
                del table[mq]
        return request.response(ResponseCode.SUCCESS)
