"""Stored messages as the admin tool shows them (pull / view / query bodies), and offsetMsgId helpers.

Decoding is protocol/record.py's; this adds the broker name, printable hosts and decompressed bodies.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

from rocketq.protocol.frame import ProtocolError
from rocketq.protocol.message_id import decode_offset_msg_id as _decode_offset_msg_id
from rocketq.protocol.properties import properties_to_string, string_to_properties
from rocketq.protocol.record import decode_records_lenient, decompress_body
from rocketq.protocol.sysflag import COMPRESSED_FLAG

_ID = struct.Struct(">4siq")


@dataclass(slots=True)
class StoredMessage:
    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    store_size: int
    body_crc: int
    prepared_transaction_offset: int
    offset_msg_id: str = ""
    broker_name: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def msg_id(self) -> str:
        """What Java's ``getMsgId()`` returns: the UNIQ_KEY when present, else the offsetMsgId."""
        return self.properties.get("UNIQ_KEY") or self.offset_msg_id


def parse_properties(text: str) -> dict[str, str]:
    return string_to_properties(text)


def encode_properties(props: dict[str, str]) -> str:
    return properties_to_string(props)


def offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """32 hex chars: IPv4(4) + port(int32) + commit log offset(int64)."""
    host, _, port = store_host.rpartition(":")
    try:
        ip = socket.inet_aton(host)
    except OSError:
        ip = b"\0\0\0\0"
    return _ID.pack(ip, int(port or 0), commit_log_offset).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(broker address, commit log offset) of an offsetMsgId; ValueError if it is not one."""
    msg_id = msg_id.strip()
    try:
        decoded = _decode_offset_msg_id(msg_id)
    except ProtocolError:
        raise ValueError(f"not an offsetMsgId (expected 32 hex characters): {msg_id!r}") from None
    return decoded.addr, decoded.offset


def decode_records(data: bytes | bytearray | memoryview, *, decompress: bool = True) -> list[StoredMessage]:
    """Every record of a pull/view/query body (stops at the first undecodable one, like 4.x clients)."""
    out: list[StoredMessage] = []
    for m in decode_records_lenient(data):
        body = bytes(m.body)
        if decompress and m.sys_flag & COMPRESSED_FLAG and body:
            try:
                body = decompress_body(body, m.sys_flag)
            except ProtocolError:
                pass  # show the stored bytes rather than nothing
        born_ip, born_port = m.born_host
        store_ip, store_port = m.store_host
        out.append(
            StoredMessage(
                topic=m.topic,
                body=body,
                properties=dict(m.properties),
                queue_id=m.queue_id,
                queue_offset=m.queue_offset,
                commit_log_offset=m.commit_log_offset,
                sys_flag=m.sys_flag,
                flag=m.flag,
                born_timestamp=m.born_timestamp,
                born_host=_fmt_host(born_ip, born_port),
                store_timestamp=m.store_timestamp,
                store_host=_fmt_host(store_ip, store_port),
                reconsume_times=m.reconsume_times,
                store_size=m.store_size,
                body_crc=m.body_crc,
                prepared_transaction_offset=m.prepared_transaction_offset,
                offset_msg_id=m.offset_msg_id,
            )
        )
    return out


def _fmt_host(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
