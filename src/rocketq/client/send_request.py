"""One message's SEND_MESSAGE_V2 request, its JSON header formatted from a per-(topic, queue) template.

The producer sends one of these per message. RemotingCommand.encode_header would build the extFields dict
and a header dict, then run the JSON encoder over both; here the fixed part of the header (group, topic,
queue and the rest of SendMessageRequestHeaderV2 that does not change between sends) is JSON-encoded once,
and a send only formats its own fields into it: the same bytes for about half the CPU.

``ext_fields`` is built on first access (an RPC hook such as the ACL signer reads it); from then on, and for
anything the template does not cover (a binary header, a remark, another language), the generic encoder
runs on that dict, so a hook's changes are sent.
"""

from __future__ import annotations

import orjson

from rocketq.protocol.codes import SerializeType
from rocketq.protocol.frame import CURRENT_VERSION, RemotingCommand

_new_request = RemotingCommand.__new__


class SendTemplate:
    """The fixed fields of SendMessageRequestHeaderV2 for one (group, topic, queue, ...): as the extFields
    dict a send starts from, and as the JSON header with slots for the per-send values."""

    __slots__ = ("ext", "json")

    def __init__(self, ext: dict[str, str]) -> None:
        # Per send: sysFlag (f), bornTimestamp (g), flag (h) and properties (i); the rest is fixed here.
        # The dict's key order is the wire order (a..m), as RemotingCommand.encode_header would write it.
        order = list(ext)
        if order[:9] != ["a", "b", "c", "d", "e", "f", "g", "h", "i"]:
            raise ValueError(f"unexpected SendMessageRequestHeaderV2 field order {order}")
        self.ext = ext
        head = orjson.dumps({k: ext[k] for k in order[:5]})[1:-1]
        tail = orjson.dumps({k: ext[k] for k in order[9:]})[1:-1]
        self.json = (
            b'{"code":%d,"language":"JAVA","version":%d,"opaque":%d,"flag":%d,"extFields":{'
            + head.replace(b"%", b"%%")
            + b',"f":"%d","g":"%d","h":"%d","i":%s'
            + (b"," + tail.replace(b"%", b"%%") if tail else b"")
            + b'},"serializeTypeCurrentRPC":"JSON"}'
        )


class SendRequest(RemotingCommand):
    """A SEND_MESSAGE_V2 (or SEND_REPLY_MESSAGE_V2) request of one message; see the module docstring."""

    __slots__ = ("_born_ts", "_ext", "_msg_flag", "_props", "_sys_flag", "_template")

    _ext: dict[str, str] | None
    _template: SendTemplate
    _sys_flag: int
    _born_ts: int
    _msg_flag: int
    _props: str

    @property  # type: ignore[override]
    def ext_fields(self) -> dict[str, str]:
        ext = self._ext
        if ext is None:
            ext = self._ext = self._template.ext.copy()
            ext["f"] = str(self._sys_flag)
            ext["g"] = str(self._born_ts)
            ext["h"] = str(self._msg_flag)
            ext["i"] = self._props
        return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, str]) -> None:
        self._ext = value

    def encode_header(self) -> bytes:
        if (
            self._ext is None
            and self.serialize_type == SerializeType.JSON
            and self.remark is None
            and self.language == "JAVA"
        ):
            return self._template.json % (
                self.code, self.version, self.opaque, self.flag, self._sys_flag, self._born_ts,
                self._msg_flag, orjson.dumps(self._props),
            )  # fmt: skip
        return RemotingCommand.encode_header(self)


def send_request(
    code: int, template: SendTemplate, sys_flag: int, born_ts: int, msg_flag: int, props: str, body: bytes
) -> SendRequest:
    """RemotingCommand.request(code, ext, body) for the ext the template and these values make."""
    req = _new_request(SendRequest)
    req.code = code
    req.opaque = 0
    req.flag = 0
    req._ext = None
    req._template = template
    req._sys_flag = sys_flag
    req._born_ts = born_ts
    req._msg_flag = msg_flag
    req._props = props
    req.body = body
    req.remark = None
    req.language = "JAVA"
    req.version = CURRENT_VERSION
    req.serialize_type = SerializeType.JSON
    return req
