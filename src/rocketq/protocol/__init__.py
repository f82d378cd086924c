"""Sans-IO RocketMQ wire protocol: bytes <-> objects. No sockets, no asyncio, no clock."""

from .codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from .frame import FrameDecoder, ProtocolError, RemotingCommand, decode_frame

__all__ = [
    "FrameDecoder",
    "LanguageCode",
    "ProtocolError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_frame",
]
