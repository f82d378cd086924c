"""PULL_MESSAGE on the wire and the handling of its result (PullAPIWrapper)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand

from .codec import decode_records
from .message import MessageExt, MessageQueue, MQBrokerError
from .subscription import SubscriptionData

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
PULL_FLAG_CLASS_FILTER = 0x8
PULL_FLAG_LITE_PULL = 0x10


class PullStatus(enum.Enum):
    FOUND = 0
    NO_NEW_MSG = 19
    NO_MATCHED_MSG = 20
    OFFSET_ILLEGAL = 21


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    suggest_which_broker_id: int = 0


def build_pull_request(
    group: str,
    mq: MessageQueue,
    offset: int,
    max_nums: int,
    sys_flag: int,
    commit_offset: int,
    suspend_timeout_ms: int,
    sub: SubscriptionData | None,
) -> RemotingCommand:
    ext = {
        "consumerGroup": group,
        "topic": mq.topic,
        "queueId": str(mq.queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": str(suspend_timeout_ms),
        "subVersion": str(sub.sub_version if sub else 0),
    }
    if sub is not None:
        ext["subscription"] = sub.sub_string
        ext["expressionType"] = sub.expression_type
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


def process_pull_response(
    resp: RemotingCommand,
    mq: MessageQueue,
    sub: SubscriptionData | None,
    addr: str,
    check_crc: bool = False,
    on_corrupt: Callable[[int, int], None] | None = None,
) -> PullResult:
    """``check_crc``: leave out records whose body fails its CRC (to on_corrupt; see decode_records)."""
    try:
        status = PullStatus(resp.code)
    except ValueError:
        raise MQBrokerError(resp.code, resp.remark, addr) from None
    ext = resp.ext_fields
    msgs: list[MessageExt] = []
    if status is PullStatus.FOUND and resp.body:
        # one pending dict for the whole pull: the properties stay unparsed until someone reads them
        extra = {"MIN_OFFSET": ext.get("minOffset", "0"), "MAX_OFFSET": ext.get("maxOffset", "0")}
        msgs = decode_records(resp.body_bytes, mq.broker_name, extra, check_crc, on_corrupt)
        if sub is not None and sub.tags_set:
            tags = sub.tags_set
            msgs = [m for m in msgs if m.tags is not None and m.tags in tags]
    return PullResult(
        status,
        int(ext.get("nextBeginOffset", 0)),
        int(ext.get("minOffset", 0)),
        int(ext.get("maxOffset", 0)),
        msgs,
        int(ext.get("suggestWhichBrokerId", 0)),
    )
