"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

The hot path: header decode, a few dict lookups, one store call. ASYNC_FLUSH answers inline; SYNC_FLUSH
returns a coroutine awaiting the store's flush future (the event loop never blocks on disk).
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from functools import partial
from typing import TYPE_CHECKING

import orjson

from rocketq.protocol import record as rec
from rocketq.protocol.codes import (
    CURRENT_VERSION,
    FLAG_RESPONSE,
    PERM_WRITE,
    VERSION_V3_4_9,
    RequestCode,
    ResponseCode,
)
from rocketq.protocol.frame import MAX_FRAME_SIZE, ProtocolError, RemotingCommand
from rocketq.protocol.headers import SendMessageRequestHeader
from rocketq.protocol.properties import (
    DLQ_GROUP_TOPIC_PREFIX,
    MAX_PROPERTIES_LENGTH,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    decode_properties,
    string_to_properties,
)
from rocketq.protocol.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_TYPE_MASK
from rocketq.remoting import Channel
from rocketq.remoting.channel import DeferredReply
from rocketq.store.dispatch import tag_hash_code

from ..validation import check_send_topic
from .send_limits import illegal_message_reason

if TYPE_CHECKING:
    from ..context import BrokerContext

PERM_RW = 6


def born_host_of(channel: Channel) -> tuple[str, int]:
    host = channel.attrs.get("born_host")
    if host is None:
        ip, _, port = channel.remote_addr.rpartition(":")
        try:
            host = (ip.strip("[]") or "127.0.0.1", int(port))
        except ValueError:
            host = ("127.0.0.1", 0)
        channel.attrs["born_host"] = host
    return host


def put_status_response(request: RemotingCommand, result) -> RemotingCommand | None:
    """Non-OK store statuses as responses (None for PUT_OK and the flush/slave statuses that still carry
    a send result)."""
    name = result.status.name
    if name in ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
        return None
    if name in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
        return request.response(ResponseCode.MESSAGE_ILLEGAL, f"the message is illegal: {name}")
    if name == "SERVICE_NOT_AVAILABLE":
        return request.response(
            ResponseCode.SERVICE_NOT_AVAILABLE, "service not available now (disk full or slave)"
        )
    if name == "OS_PAGECACHE_BUSY":
        return request.response(
            ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        )
    if name == "CREATE_MAPEDFILE_FAILED":
        return request.response(
            ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
        )
    return request.response(ResponseCode.SYSTEM_ERROR, f"put message failed: {name}")


_NEEDLES: dict[str, tuple[str, str]] = {}


def _last_value(props: str, key: str) -> str | None:
    """Value of key in a property string as string_to_properties would give it (the last pair wins)."""
    needles = _NEEDLES.get(key)
    if needles is None:
        needles = _NEEDLES[key] = (f"\x02{key}\x01", f"{key}\x01")  # a few constant keys
    i = props.rfind(needles[0])
    if i >= 0:
        i += len(key) + 2
    elif props.startswith(needles[1]):
        i = len(key) + 1
    else:
        return None
    j = props.find("\x02", i)
    return props[i:] if j < 0 else props[i:j]


_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
_SUCCESS = ResponseCode.SUCCESS

_STATUS_CODE = {
    "PUT_OK": ResponseCode.SUCCESS,
    "FLUSH_DISK_TIMEOUT": ResponseCode.FLUSH_DISK_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": ResponseCode.FLUSH_SLAVE_TIMEOUT,
    "SLAVE_NOT_AVAILABLE": ResponseCode.SLAVE_NOT_AVAILABLE,
}


_OK_HEADER = (
    b'{"code":%d,"language":"JAVA","version":%d,"opaque":%d,"flag":%d,'
    b'"extFields":{"msgId":"%b","queueId":"%d","queueOffset":"%d","MSG_REGION":%b,"TRACE_ON":%b},'
    b'"serializeTypeCurrentRPC":"JSON"}'
)
_FRAME_PREFIX = struct.Struct(">ii")
_new_ok = object.__new__


class SendOkResponse(RemotingCommand):
    """A send's answer (SUCCESS or a flush/slave status with a send result), its JSON header formatted from
    a template: the bytes RemotingCommand.encode_header gives for the same fields, without building the
    extFields dict or running the JSON encoder (per message). The values need no escaping: msgId is hex
    (comma-joined for a batch), the ids ints, region and traceOn are JSON-encoded once (SendProcessor.reload).

    ``ext_fields`` is built on first access; from then on (the dict may have been changed) and for anything
    the template does not cover (a binary header, a remark, another language) the generic encoder runs."""

    __slots__ = ("_ext", "_msg_id", "_parts", "_queue_id", "_queue_offset", "_strings")

    _ext: dict[str, str] | None
    _msg_id: str
    _queue_id: int
    _queue_offset: int
    _strings: tuple[str, str, bytes, bytes]  # region, traceOn, both JSON-encoded

    @property  # type: ignore[override]
    def ext_fields(self) -> dict[str, str]:
        ext = self._ext
        if ext is None:
            region, trace_on, _, _ = self._strings
            ext = self._ext = {
                "msgId": self._msg_id,
                "queueId": str(self._queue_id),
                "queueOffset": str(self._queue_offset),
                "MSG_REGION": region,
                "TRACE_ON": trace_on,
            }
        return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, str]) -> None:
        self._ext = value

    def encode_header(self) -> bytes:
        if self._ext is None and self.serialize_type == 0 and self.remark is None and self.language == "JAVA":
            _, _, region, trace_on = self._strings
            return _OK_HEADER % (
                self.code, self.version, self.opaque, self.flag, self._msg_id.encode(), self._queue_id,
                self._queue_offset, region, trace_on,
            )  # fmt: skip
        return RemotingCommand.encode_header(self)

    def prebuild(self) -> None:
        """Encode the frame now (an answer that waits for its fdatasync); frame_parts() hands out these
        bytes while the fields they were made from are unchanged."""
        self._parts = (self.code, self.opaque, self.flag, self.frame_parts())

    def frame_parts(self) -> list[bytes | bytearray | memoryview]:
        built = self._parts
        if (
            built is not None
            and self._ext is None
            and built[0] == self.code
            and built[1] == self.opaque
            and built[2] == self.flag
        ):
            return built[3]
        body = self.body
        if body == b"":
            header = self.encode_header()
            n = len(header)
            if n + 4 <= MAX_FRAME_SIZE:
                return [_FRAME_PREFIX.pack(n + 4, (self.serialize_type << 24) | n) + header]
        return RemotingCommand.frame_parts(self)


def send_ok_response(
    request: RemotingCommand, code: int, msg_id: str, queue_id: int, queue_offset: int, strings: tuple
) -> SendOkResponse:
    """request.response(code, None, {msgId, queueId, queueOffset, MSG_REGION, TRACE_ON}) as a SendOkResponse;
    strings: (region, traceOn, JSON of region, JSON of traceOn)."""
    resp = _new_ok(SendOkResponse)
    resp._parts = None
    resp.code = code
    resp.opaque = request.opaque
    resp.flag = FLAG_RESPONSE
    resp._ext = None
    resp._msg_id = msg_id
    resp._queue_id = queue_id
    resp._queue_offset = queue_offset
    resp._strings = strings
    resp.body = b""
    resp.remark = None
    resp.language = "JAVA"
    resp.version = CURRENT_VERSION
    resp.serialize_type = request.serialize_type
    return resp


class SendProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        self.cluster = ctl.cfg["brokerClusterName"]
        self._cluster_pair = f"{PROPERTY_CLUSTER}\x01{self.cluster}"
        self._cluster_suffix = "\x02" + self._cluster_pair
        self.trace_on = "true"
        self.stats = ctl.stats
        from rocketq.store import MessageToStore, PutMessageStatus

        self.MessageToStore = MessageToStore
        self.PUT_OK = PutMessageStatus.PUT_OK
        rep = ctl.replication
        self.slave = rep is not None and rep.is_slave
        self.acks = rep.acks if rep is not None else None  # SYNC_MASTER: answers wait for the slaves
        self.reload()

    def reload(self) -> None:
        """Re-read the config values cached for the hot path (after UPDATE_BROKER_CONFIG)."""
        cfg = self.ctl.cfg
        self.max_size = cfg["maxMessageSize"]
        self.region = cfg["region"]
        self.reject_tx = cfg["rejectTransactionMessage"]
        # for SendOkResponse: the strings, and their JSON as RemotingCommand.encode_header would write it
        self._ok_strings = (
            self.region,
            self.trace_on,
            orjson.dumps(self.region),
            orjson.dumps(self.trace_on),
        )

    def register(self, server) -> None:
        server.register_processor(RequestCode.SEND_MESSAGE, self.process)
        server.register_processor(RequestCode.SEND_MESSAGE_V2, self.process)
        server.register_processor(RequestCode.SEND_BATCH_MESSAGE, self.process)

    # -- checks ------------------------------------------------------------------------------
    def _check(self, request: RemotingCommand, h: SendMessageRequestHeader):
        """(topic_config, None) or (None, error response)."""
        ctl = self.ctl
        if not ctl.broker_perm & PERM_WRITE:
            return None, request.response(
                ResponseCode.NO_PERMISSION, f"the broker[{ctl.cfg['brokerIP1']}] sending message is forbidden"
            )
        topic = h.topic
        tc = ctl.topics.table.get(topic)
        if tc is None:
            reason = check_send_topic(topic)
            if reason is not None:
                return None, request.response(ResponseCode.SYSTEM_ERROR, reason)
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = ctl.topics.create_in_send_back(topic, 1, PERM_RW, 0)
            else:
                tc = ctl.topics.create_in_send(topic, h.default_topic, h.default_topic_queue_nums, 0)
            if tc is None:
                return None, request.response(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please! http://rocketmq.apache.org/docs/faq/",
                )
        if not tc.perm & PERM_WRITE:
            return None, request.response(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        qid = h.queue_id
        if qid >= tc.write_queue_nums:
            return None, request.response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{qid}] is illegal, topic:{topic} writeQueueNums:{tc.write_queue_nums}",
            )
        return tc, None

    # -- entry -------------------------------------------------------------------------------
    def process(self, channel: Channel, request: RemotingCommand):
        if self.slave or self.acks is not None:
            refused = self._replica_check(request)
            if refused is not None:
                return refused
        code = request.code
        h = SendMessageRequestHeader.of_request(request)
        tc, err = self._check(request, h)
        if err is not None:
            return err
        if h.queue_id < 0:
            h.queue_id = random.randrange(tc.write_queue_nums)
        if code == _SEND_BATCH_MESSAGE or h.batch:
            return self._send_batch(channel, request, h)
        return self._send_one(channel, request, h)

    def _replica_check(self, request: RemotingCommand) -> RemotingCommand | None:
        if self.slave:  # RocketMQ's store refuses puts on a slave with the same code
            return request.response(
                ResponseCode.SERVICE_NOT_AVAILABLE, "service not available now: this broker is a slave"
            )
        if not self.acks.enough_replicas():  # type: ignore[union-attr]
            return request.response(ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough")
        return None

    def _send_one(self, channel: Channel, request: RemotingCommand, h: SendMessageRequestHeader):
        body = request.body
        if len(body) > self.max_size:
            return request.response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {len(body)} is over maxMessageSize={self.max_size} bytes",
            )
        raw_props = h.properties or ""
        if len(raw_props) > MAX_PROPERTIES_LENGTH:
            return request.response(
                ResponseCode.MESSAGE_ILLEGAL, f"the message properties length over {MAX_PROPERTIES_LENGTH}"
            )
        if (
            "DELAY\x01" not in raw_props
            and "TRAN_MSG\x01" not in raw_props
            and "CLUSTER\x01" not in raw_props
            and not (h.sys_flag & TRANSACTION_TYPE_MASK)
            and not h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
            and h.topic != SCHEDULE_TOPIC
        ):
            fast = self._send_plain(channel, request, h, raw_props)
            if fast is not None:
                return fast
        props = string_to_properties(raw_props)
        topic = h.topic
        queue_id = h.queue_id
        reconsume_times = h.reconsume_times or 0
        ctl = self.ctl
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            redirected = self._retry_to_dlq(request, h, props, reconsume_times)
            if isinstance(redirected, RemotingCommand):
                return redirected
            if redirected is not None:
                topic, queue_id = redirected
        props[PROPERTY_CLUSTER] = self.cluster
        sys_flag = h.sys_flag
        tags_code = None
        if (
            props.get(PROPERTY_TRANSACTION_PREPARED) == "true"
            or (sys_flag & TRANSACTION_TYPE_MASK) == TRANSACTION_PREPARED_TYPE
        ):
            if self.reject_tx:
                return request.response(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{ctl.cfg['brokerIP1']}] sending transaction message is forbidden",
                )
            props[PROPERTY_REAL_TOPIC] = topic
            props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
            props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
            topic, queue_id = TRANS_HALF_TOPIC, 0
            # stored as a plain message of the half topic so it is dispatched and can be checked
            sys_flag &= ~TRANSACTION_TYPE_MASK
        elif PROPERTY_DELAY_TIME_LEVEL in props:
            moved = ctl.delay_levels.redirect(props, topic, queue_id, int(time.time() * 1000))
            if moved is not None:
                topic, queue_id, _ = moved  # the store derives the delivery time (tags code)
        msg = self.MessageToStore(
            topic=topic,
            queue_id=queue_id,
            body=body,
            flag=h.flag,
            properties=props,
            sys_flag=sys_flag,
            born_timestamp=h.born_timestamp,
            born_host=born_host_of(channel),
            reconsume_times=reconsume_times,
            tags_code=tags_code,
        )
        result = ctl.store.put_message(msg)
        if props.get("WAIT") == "false":  # waitStoreMsgOK=false: answer without waiting for the flush
            result.flush_future = None
            result.flush_offset = 0
            return self._respond(request, result, h.queue_id, False)
        # like RocketMQ the response names the requested queue (not the schedule/half/DLQ queue)
        return self._respond(request, result, h.queue_id)

    def _stored_props(self, raw: str) -> tuple[bytes, int]:
        """A client's property string as a message needing no property rewrite is stored (its trailing
        separator dropped, CLUSTER appended), and the hash code of its TAGS."""
        if raw.endswith("\x02"):  # Java clients end with a separator; the store's layout does not
            raw = raw[:-1]
        tags = _last_value(raw, "TAGS") if "TAGS\x01" in raw else None
        pb = (raw + self._cluster_suffix if raw else self._cluster_pair).encode()
        return pb, tag_hash_code(tags) if tags else 0

    def _send_plain(self, channel: Channel, request: RemotingCommand, h: SendMessageRequestHeader, raw: str):
        """A message needing no property rewrite (no retry/DLQ, transaction, delay, or CLUSTER of its own):
        store the client's property string plus CLUSTER as is, skipping the dict round trip. None: take the
        general path (which also owns the exact PROPERTIES_SIZE_EXCEEDED check)."""
        pb, tags_code = self._stored_props(raw)
        if len(pb) > MAX_PROPERTIES_LENGTH:
            return None  # the general path normalises first: same limit on the same string as before
        queue_id = h.queue_id
        result = self.ctl.store.put_plain(
            h.topic, queue_id, request.body, h.flag, h.sys_flag, h.born_timestamp,
            channel.attrs.get("born_host") or born_host_of(channel), h.reconsume_times or 0, tags_code, pb,
        )  # fmt: skip
        if result.__class__ is tuple:  # ASYNC_FLUSH, stored: (offsetMsgId, queue offset)
            acks = self.acks
            if acks is not None and not ("WAIT\x01false" in raw and _last_value(raw, "WAIT") == "false"):
                return acks.respond_plain(request, result[0], queue_id, result[1], self._ok_strings)
            self.stats.put += 1
            return send_ok_response(request, _SUCCESS, result[0], queue_id, result[1], self._ok_strings)
        if "WAIT\x01false" in raw and _last_value(raw, "WAIT") == "false":
            result.flush_future = None  # waitStoreMsgOK=false: answer without waiting for the flush
            result.flush_offset = 0
            return self._respond(request, result, queue_id, False)
        return self._respond(request, result, queue_id)

    def _retry_to_dlq(
        self, request, h: SendMessageRequestHeader, props: dict[str, str], reconsume_times: int
    ):
        """A client resending to %RETRY%group itself: past max reconsume times it goes to %DLQ%group."""
        ctl = self.ctl
        group = h.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        sgc = ctl.subscriptions.get(group)
        if sgc is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = sgc.retry_max_times
        if request.version >= VERSION_V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        if reconsume_times >= max_times:  # RocketMQ 4.x handleRetryAndDLQ
            dlq = DLQ_GROUP_TOPIC_PREFIX + group
            tc = ctl.topics.create_in_send_back(dlq, 1, PERM_RW, 0)
            if not tc.perm & PERM_WRITE:
                return request.response(
                    ResponseCode.NO_PERMISSION, f"the topic[{dlq}] sending message is forbidden"
                )
            props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
            ctl.stats.sent_to_dlq(group, props.get(PROPERTY_RETRY_TOPIC) or h.topic)  # metrics
            return dlq, 0
        return None

    def _respond(self, request: RemotingCommand, result, queue_id: int, replicate: bool = True):
        if result.status is self.PUT_OK:
            if self.acks is not None and replicate:  # SYNC_MASTER: the slaves' acknowledgements too
                return self.acks.respond(request, result, queue_id, self._ok_strings)
            if result.flush_offset:  # SYNC_FLUSH: the broker's flush waiter answers
                return self._wait_flushed(request, result, queue_id)
            if result.flush_future is None:  # ASYNC_FLUSH: the common case
                return self._ok(request, result, ResponseCode.SUCCESS, queue_id)
        err = put_status_response(request, result)
        if err is not None:
            if err.code == ResponseCode.MESSAGE_ILLEGAL:  # say which limit (send_limits.py)
                cfg = self.ctl.cfg
                err.remark = illegal_message_reason(request, cfg["maxMessageSize"], cfg.commitlog_file_size)
            return err
        fut = result.flush_future
        if fut is not None:
            return self._await_flush(request, result, fut, queue_id)
        return self._ok(request, result, _STATUS_CODE[result.status.name], queue_id)

    def _wait_flushed(self, request: RemotingCommand, result, queue_id: int) -> DeferredReply:
        """An answer the channel sends once the flush waiter reports this record's round (no Task). The
        SUCCESS answer is built and encoded now, while the fdatasync runs: the round's completion only
        sends it."""
        d = DeferredReply()
        ids = result.msg_ids
        msg_id = ids[0] if len(ids) == 1 else ",".join(ids)
        resp = send_ok_response(request, _SUCCESS, msg_id, queue_id, result.queue_offset, self._ok_strings)
        resp.prebuild()
        self.ctl.flush_waiter.add(
            result.flush_offset, partial(self._flushed, d, resp, request, result, queue_id)
        )
        return d

    def _flushed(self, d: DeferredReply, resp: SendOkResponse, request, result, queue_id: int, ok: bool):
        if not d.cancelled:  # cancelled: the connection closed
            if ok:
                self.stats.put += result.msg_num or 1
                d.resolve(resp)
            else:
                d.resolve(self._ok(request, result, ResponseCode.FLUSH_DISK_TIMEOUT, queue_id))

    async def _await_flush(self, request: RemotingCommand, result, fut, queue_id: int) -> RemotingCommand:
        try:
            flushed = await asyncio.wrap_future(fut)
        except Exception:
            flushed = False
        code = _STATUS_CODE[result.status.name]
        if not flushed and code == ResponseCode.SUCCESS:
            code = ResponseCode.FLUSH_DISK_TIMEOUT
        return self._ok(request, result, code, queue_id)

    def _ok(self, request: RemotingCommand, result, code: int, queue_id: int) -> RemotingCommand:
        self.stats.put += result.msg_num or 1
        ids = result.msg_ids
        msg_id = ids[0] if len(ids) == 1 else ",".join(ids)
        return send_ok_response(request, code, msg_id, queue_id, result.queue_offset, self._ok_strings)

    # -- batch -------------------------------------------------------------------------------
    def _plain_batch(self, channel: Channel, h: SendMessageRequestHeader, inner: list) -> list | None:
        """The batch's records as _send_plain stores a single message: the client's property string plus
        CLUSTER, tags hashed from it, no dict round trip. None if a message asks for a delay level (the
        general path rejects it)."""
        stored = self._stored_props
        born_host = channel.attrs.get("born_host") or born_host_of(channel)
        topic, queue_id, sys_flag, born_ts = h.topic, h.queue_id, h.sys_flag, h.born_timestamp
        new = self.MessageToStore
        msgs = []
        for body, flag, praw in inner:
            raw = bytes(praw).decode("utf-8", "replace") if len(praw) else ""
            if "DELAY\x01" in raw:
                return None
            pb, tags_code = stored(raw)
            # positional, in MessageToStore's field order (see _send_plain)
            msgs.append(
                new(topic, queue_id, body, flag, {}, sys_flag, born_ts, born_host, 0, 0, tags_code, pb)
            )
        return msgs

    def _batch_records(
        self, channel: Channel, h: SendMessageRequestHeader, inner: list, batch_props: dict[str, str]
    ) -> list | None:
        """The general batch path: each message's properties parsed and merged with the batch's own
        (which win, as in RocketMQ), CLUSTER added. None if a message asks for a delay level."""
        if PROPERTY_DELAY_TIME_LEVEL in batch_props:
            return None
        batch_props[PROPERTY_CLUSTER] = self.cluster
        born_host = born_host_of(channel)
        msgs = []
        for body, flag, praw in inner:
            props = decode_properties(praw) if len(praw) else {}
            if PROPERTY_DELAY_TIME_LEVEL in props:
                return None
            props.update(batch_props)
            msgs.append(
                self.MessageToStore(
                    topic=h.topic,
                    queue_id=h.queue_id,
                    body=body,
                    flag=flag,
                    properties=props,
                    sys_flag=h.sys_flag,
                    born_timestamp=h.born_timestamp,
                    born_host=born_host,
                    reconsume_times=0,
                )
            )
        return msgs

    def _send_batch(self, channel: Channel, request: RemotingCommand, h: SendMessageRequestHeader):
        body = request.body
        if len(body) > self.max_size:
            return request.response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {len(body)} is over maxMessageSize={self.max_size} bytes",
            )
        if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return request.response(
                ResponseCode.MESSAGE_ILLEGAL, "batch request does not support retry group " + h.topic
            )
        try:
            inner = rec.decode_batch_raw(body)
        except ProtocolError as exc:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}")
        if not inner:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
        batch_props = string_to_properties(h.properties or "")
        wait = batch_props.pop("WAIT", None)
        # nothing but WAIT at the batch level (what clients send): each record keeps its own property string
        msgs = self._plain_batch(channel, h, inner) if not batch_props else None
        if msgs is None:
            msgs = self._batch_records(channel, h, inner, batch_props)
            if msgs is None:
                return request.response(
                    ResponseCode.MESSAGE_ILLEGAL, "batch message does not support delay level"
                )
        topic, queue_id = h.topic, h.queue_id
        result = self.ctl.store.put_messages(topic, queue_id, msgs)
        if wait == "false":  # waitStoreMsgOK=false: answer without waiting for the flush
            result.flush_future = None
            result.flush_offset = 0
            return self._respond(request, result, queue_id, False)
        return self._respond(request, result, queue_id)
