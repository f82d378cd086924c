"""Client and admin JSON bodies: heartbeats, queue locks, connections, stats, offset resets.

JSON names follow RocketMQ 4.9.x. Bodies with MessageQueue-keyed maps (TopicStatsTable, ConsumeStats,
ResetOffsetBody, ConsumerRunningInfo) encode in fastjson's form (object keys), which Java's admin tools
expect; everything decodes leniently (``decode`` accepts standard JSON and the fastjson form).
"""

from __future__ import annotations

from enum import StrEnum

from rocketq.filter.tags import SUB_ALL, parse_tag_expression

from ._jsonmodel import JsonModel, jfield, json_model
from .route import DataVersion

__all__ = [
    "CheckClientRequestBody",
    "Connection",
    "ConsumeFromWhere",
    "ConsumeStats",
    "ConsumeStatus",
    "ConsumeType",
    "ConsumerConnection",
    "ConsumerData",
    "ConsumerOffsetSerializeWrapper",
    "ConsumerRunningInfo",
    "ExpressionType",
    "GetConsumerListByGroupResponseBody",
    "GroupList",
    "HeartbeatData",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "OffsetWrapper",
    "ProcessQueueInfo",
    "ProducerConnection",
    "ProducerData",
    "ResetOffsetBody",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicOffset",
    "TopicStatsTable",
    "UnlockBatchRequestBody",
]


class ConsumeType(StrEnum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push


class MessageModel(StrEnum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(StrEnum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
    # Deprecated in RocketMQ but still seen on the wire from old clients.
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = (
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    )
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"


class ExpressionType(StrEnum):
    TAG = "TAG"
    SQL92 = "SQL92"


# -- queues ---------------------------------------------------------------------------------------------
@json_model(frozen=True, order=True)
class MessageQueue(JsonModel):
    """A queue of a topic on one broker. Hashable; ordered like Java (topic, brokerName, queueId)."""

    topic: str = ""
    broker_name: str = ""
    queue_id: int = 0

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


# -- heartbeat ------------------------------------------------------------------------------------------
@json_model
class SubscriptionData(JsonModel):
    topic: str = ""
    sub_string: str = SUB_ALL
    tags_set: list[str] = jfield(default_factory=list)
    code_set: list[int] = jfield(default_factory=list)
    sub_version: int = 0
    expression_type: str = ExpressionType.TAG  # missing on the wire (old clients) means TAG
    class_filter_mode: bool = False

    @classmethod
    def of_tags(cls, topic: str, expression: str | None, sub_version: int = 0) -> SubscriptionData:
        """A TAG subscription with tagsSet/codeSet filled the way Java's FilterAPI does."""
        expr = parse_tag_expression(expression)
        return cls(
            topic=topic,
            sub_string=expr.sub_string,
            tags_set=expr.tags_list(),
            code_set=expr.codes_list(),
            sub_version=sub_version,
        )

    @classmethod
    def of_sql(cls, topic: str, expression: str, sub_version: int = 0) -> SubscriptionData:
        return cls(topic=topic, sub_string=expression, sub_version=sub_version, expression_type="SQL92")


@json_model
class ConsumerData(JsonModel):
    group_name: str = ""
    consume_type: str = ConsumeType.CONSUME_PASSIVELY
    message_model: str = MessageModel.CLUSTERING
    consume_from_where: str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = jfield(default_factory=list)
    unit_mode: bool = False


@json_model
class ProducerData(JsonModel):
    group_name: str = ""


@json_model
class HeartbeatData(JsonModel):
    client_id: str = jfield(json="clientID", default="")  # "ip@pid" or "ip@instance"
    producer_data_set: list[ProducerData] = jfield(default_factory=list)
    consumer_data_set: list[ConsumerData] = jfield(default_factory=list)


@json_model
class CheckClientRequestBody(JsonModel):
    """CHECK_CLIENT_CONFIG (46): sent before subscribing with SQL92."""

    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None


# -- ordered consumption locks --------------------------------------------------------------------------
@json_model
class LockBatchRequestBody(JsonModel):
    consumer_group: str = ""
    client_id: str = ""
    only_this_broker: bool = False
    mq_set: set[MessageQueue] = jfield(default_factory=set)


@json_model
class LockBatchResponseBody(JsonModel):
    lock_ok_mq_set: set[MessageQueue] = jfield(json="lockOKMQSet", default_factory=set)


@json_model
class UnlockBatchRequestBody(JsonModel):
    consumer_group: str = ""
    client_id: str = ""
    only_this_broker: bool = False
    mq_set: set[MessageQueue] = jfield(default_factory=set)


# -- connections ----------------------------------------------------------------------------------------
@json_model
class Connection(JsonModel):
    client_id: str = ""
    client_addr: str = ""
    language: str = "JAVA"
    version: int = 0


@json_model
class ConsumerConnection(JsonModel):
    connection_set: list[Connection] = jfield(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = jfield(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@json_model
class ProducerConnection(JsonModel):
    connection_set: list[Connection] = jfield(default_factory=list)


@json_model
class GetConsumerListByGroupResponseBody(JsonModel):
    consumer_id_list: list[str] = jfield(default_factory=list)


@json_model
class GroupList(JsonModel):
    """QUERY_TOPIC_CONSUME_BY_WHO (300) response."""

    group_list: set[str] = jfield(default_factory=set)


# -- stats / admin (MessageQueue-keyed: fastjson form on output) ----------------------------------------
@json_model
class TopicOffset(JsonModel):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@json_model
class TopicStatsTable(JsonModel):
    __fastjson__ = True
    offset_table: dict[MessageQueue, TopicOffset] = jfield(default_factory=dict)


@json_model
class OffsetWrapper(JsonModel):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0


@json_model
class ConsumeStats(JsonModel):
    __fastjson__ = True
    offset_table: dict[MessageQueue, OffsetWrapper] = jfield(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@json_model
class ResetOffsetBody(JsonModel):
    __fastjson__ = True
    offset_table: dict[MessageQueue, int] = jfield(default_factory=dict)


@json_model
class ProcessQueueInfo(JsonModel):
    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mi_b: int = jfield(json="cachedMsgSizeInMiB", default=0)
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False  # sic: RocketMQ's spelling
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@json_model
class ConsumeStatus(JsonModel):
    pull_rt: float = jfield(json="pullRT", default=0.0)
    pull_tps: float = jfield(json="pullTPS", default=0.0)
    consume_rt: float = jfield(json="consumeRT", default=0.0)
    consume_ok_tps: float = jfield(json="consumeOKTPS", default=0.0)
    consume_failed_tps: float = jfield(json="consumeFailedTPS", default=0.0)
    consume_failed_msgs: int = 0


@json_model
class ConsumerRunningInfo(JsonModel):
    """GET_CONSUMER_RUNNING_INFO (307) answer from a consumer."""

    __fastjson__ = True
    properties: dict[str, str] = jfield(default_factory=dict)
    subscription_set: list[SubscriptionData] = jfield(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = jfield(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = jfield(default_factory=dict)
    jstack: str | None = None


# -- broker config files / admin ------------------------------------------------------------------------
@json_model
class SubscriptionGroupConfig(JsonModel):
    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True


@json_model
class SubscriptionGroupWrapper(JsonModel):
    subscription_group_table: dict[str, SubscriptionGroupConfig] = jfield(default_factory=dict)
    data_version: DataVersion = jfield(default_factory=DataVersion)


@json_model
class ConsumerOffsetSerializeWrapper(JsonModel):
    """GET_ALL_CONSUMER_OFFSET (43) body: "topic@group" -> {queueId: offset}."""

    offset_table: dict[str, dict[int, int]] = jfield(default_factory=dict)
