"""Sans-IO RocketMQ wire protocol: bytes <-> objects. No sockets, no asyncio, no clock."""

from rocketq.filter.tags import parse_tag_expression, tag_hash

from .bodies import HeartbeatData, MessageQueue, SubscriptionData
from .codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from .frame import FrameDecoder, ProtocolError, RemotingCommand, decode_frame
from .message_id import UniqIdGenerator, decode_offset_msg_id, encode_offset_msg_id
from .route import BrokerData, QueueData, RegisterBrokerBody, TopicConfig, TopicRouteData, body_crc32

__all__ = [
    "BrokerData",
    "FrameDecoder",
    "HeartbeatData",
    "LanguageCode",
    "MessageQueue",
    "ProtocolError",
    "QueueData",
    "RegisterBrokerBody",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "SubscriptionData",
    "TopicConfig",
    "TopicRouteData",
    "UniqIdGenerator",
    "body_crc32",
    "decode_frame",
    "decode_offset_msg_id",
    "encode_offset_msg_id",
    "parse_tag_expression",
    "tag_hash",
]
