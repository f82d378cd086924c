"""PULL_MESSAGE (11) with long polling. The response body is the store's memoryview slices (no copy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketq.protocol.codes import PERM_READ, RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.headers import PullMessageRequestHeader, PullSysFlag
from rocketq.remoting import Channel

from ..read_acl import carries_other_topics
from ..sql92 import SqlError
from ..subscription import SubscriptionData, filter_for
from ..validation import check_name

if TYPE_CHECKING:
    from ..context import BrokerContext

_F = ResponseCode
# Plain ints: `int & IntFlag` builds an IntFlag through EnumType.__call__, a few µs per PULL.
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)
_SUSPEND = int(PullSysFlag.SUSPEND)
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_SUCCESS = int(_F.SUCCESS)
_PULL_NOT_FOUND = int(_F.PULL_NOT_FOUND)
_SUB_CACHE_MAX = 1024
# GetMessageStatus name -> (code, ...) ; NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE depend on the offset
_STATUS = {
    "FOUND": _F.SUCCESS,
    "NO_MATCHED_MESSAGE": _F.PULL_RETRY_IMMEDIATELY,
    "MESSAGE_WAS_REMOVING": _F.PULL_RETRY_IMMEDIATELY,
    "OFFSET_FOUND_NULL": _F.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": _F.PULL_OFFSET_MOVED,
    "OFFSET_OVERFLOW_ONE": _F.PULL_NOT_FOUND,
    "OFFSET_TOO_SMALL": _F.PULL_OFFSET_MOVED,
}


def _no_sql(request: RemotingCommand, expression_type: str | None) -> RemotingCommand:
    # enablePropertyFilter=false: refuse rather than deliver unfiltered messages
    return request.response(
        _F.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {expression_type}"
    )


class PullProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        self.reload()

    def reload(self) -> None:
        """Re-read the config values cached for the hot path (after UPDATE_BROKER_CONFIG)."""
        cfg = self.ctl.cfg
        self.long_polling = cfg["longPollingEnable"]
        self.short_polling_s = cfg["shortPollingTimeMills"] / 1000.0
        self.property_filter = cfg["enablePropertyFilter"]
        self.carrier_checks = self.ctl.reads.enabled  # aclEnable: %RETRY% / %DLQ% / ... checked per message
        self.slave = cfg["brokerRole"] == "SLAVE"  # a slave does not store offsets sent with pulls
        self.slave_read = None  # slaveReadEnable, or a slave: the answers' suggestWhichBrokerId
        if self.slave or cfg["slaveReadEnable"]:
            from ..replication import SlaveRead

            self.slave_read = SlaveRead(cfg)
        # SubscriptionData per (topic, expression, version, type): every PULL of a consumer carries the same
        # subscription; building it parses the tag expression and hashes each tag. Never mutated.
        self._subs: dict[tuple[str, str | None, int, str | None], SubscriptionData] = {}

    def register(self, server) -> None:
        server.register_processor(RequestCode.PULL_MESSAGE, self.process)

    def process(self, channel: Channel, request: RemotingCommand):
        return self._pull(channel, request, True)

    def repull(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return self._pull(channel, request, False)

    def _subscription(self, request, h: PullMessageRequestHeader):
        """(SubscriptionData | None, error response | None)."""
        if h.sys_flag & _SUBSCRIPTION:
            if h.expression_type not in (None, "", "TAG") and not self.property_filter:
                return None, _no_sql(request, h.expression_type)
            key = (h.topic, h.subscription, h.sub_version, h.expression_type)
            sd = self._subs.get(key)
            if sd is None:
                if len(self._subs) >= _SUB_CACHE_MAX:
                    self._subs.clear()
                sd = self._subs[key] = SubscriptionData.build(*key)
            return sd, None
        cgi = self.ctl.clients.get_consumer_group(h.consumer_group)
        if cgi is None:
            return None, request.response(
                _F.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist, group: {h.consumer_group}"
            )
        sd = cgi.find_subscription(h.topic)
        if sd is None:
            return None, request.response(
                _F.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist, group: {h.consumer_group}"
            )
        if sd.expression_type != "TAG" and not self.property_filter:
            return None, _no_sql(request, sd.expression_type)
        if sd.sub_version < h.sub_version:
            return None, request.response(
                _F.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest, group: {h.consumer_group}",
            )
        return sd, None

    def _authorize_carried(self, channel: Channel, request: RemotingCommand, result):
        """A topic carrying other topics' messages (%RETRY%, %DLQ%, ...): serve the records up to the first
        one whose own topic the account may not read; NO_PERMISSION when that is the first one."""
        reads = self.ctl.reads
        subject = reads.subject(channel, request)
        n, why = reads.readable_prefix(subject, result.buffers)
        if why is None:
            return None
        if n == 0:
            result.release()
            return request.response(_F.NO_PERMISSION, why)
        for view in result.buffers[n:]:
            view.release()
        result.next_begin_offset = result.queue_offsets[n]
        del result.buffers[n:]
        del result.queue_offsets[n:]
        result.message_count = n
        return None

    def _pull(self, channel: Channel, request: RemotingCommand, allow_suspend: bool):
        ctl = self.ctl
        h = PullMessageRequestHeader.from_ext(request.ext_fields)
        if not ctl.broker_perm & PERM_READ:
            return request.response(
                _F.NO_PERMISSION, f"the broker[{ctl.cfg['brokerIP1']}] pulling message is forbidden"
            )
        sgc = ctl.subscriptions.get(h.consumer_group)
        if sgc is None:
            reason = check_name("consumer group", h.consumer_group)
            if reason is not None:
                return request.response(_F.SUBSCRIPTION_GROUP_NOT_EXIST, reason)
            sgc = ctl.subscriptions.find_or_create(h.consumer_group)
        if sgc is None:
            return request.response(
                _F.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{h.consumer_group}] does not exist"
            )
        if not sgc.consume_enable:
            return request.response(_F.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}")
        tc = ctl.topics.table.get(h.topic)
        if tc is None:
            return request.response(_F.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return request.response(_F.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
        if h.queue_id < 0 or h.queue_id >= tc.read_queue_nums:
            return request.response(
                _F.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        sd, err = self._subscription(request, h)
        if err is not None:
            return err
        if sd is not None and sd.expression_type not in ("TAG", "SQL92"):
            return request.response(
                _F.SUBSCRIPTION_PARSE_FAILED, f"unknown expressionType {sd.expression_type}"
            )
        try:
            msg_filter = filter_for(sd)
        except SqlError as exc:
            return request.response(
                _F.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
            )
        max_nums = h.max_msg_nums if 0 < h.max_msg_nums <= 1024 else 32
        result = ctl.store.get_message(
            h.consumer_group, h.topic, h.queue_id, h.queue_offset, max_nums, msg_filter
        )
        if result.message_count and self.carrier_checks and carries_other_topics(h.topic):
            denied = self._authorize_carried(channel, request, result)
            if denied is not None:
                return denied
        status = result.status.name
        mapped = _STATUS.get(status)
        code: int
        if mapped is None:  # NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE
            code = _F.PULL_OFFSET_MOVED if h.queue_offset != 0 else _PULL_NOT_FOUND
        else:
            code = mapped
        ext = {
            "suggestWhichBrokerId": "0",
            "nextBeginOffset": str(result.next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        if self.slave_read is not None:
            code, ext["suggestWhichBrokerId"] = self.slave_read.suggest(code, result, sgc, ctl.store)
        # commit only on the first pass (not when a held request is re-run), like RocketMQ
        if allow_suspend and h.sys_flag & _COMMIT_OFFSET and h.commit_offset >= 0 and not self.slave:
            ctl.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        if code == _SUCCESS:
            ctl.stats.pulled(
                h.consumer_group, h.topic, h.queue_id, result.message_count, result.buffer_total_size,
                result.next_begin_offset,
            )  # fmt: skip
            # The views go straight to the transport; they are dropped (not released) once written,
            # since uvloop may still hold them after writelines() returns.
            return request.response(code, None, ext, result.buffers)
        if code == _PULL_NOT_FOUND and allow_suspend and h.sys_flag & _SUSPEND:
            timeout_s = h.suspend_timeout_millis / 1000.0 if self.long_polling else self.short_polling_s
            timeout_s = min(max(timeout_s, 0.0), 3600.0)
            return ctl.hold.hold(h.topic, h.queue_id, channel, request, h.queue_offset, timeout_s)
        return request.response(code, status if code != _PULL_NOT_FOUND else None, ext)
