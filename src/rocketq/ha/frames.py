"""The classic HA wire protocol (RocketMQ's DefaultHAService), sans-IO: bytes in, frames out.

Raw TCP on haListenPort, big-endian, no handshake:
  slave -> master   report   ``slaveMaxOffset:i64`` (8 bytes): on connect, after appending, as a heartbeat
  master -> slave   transfer ``phyOffset:i64 | bodySize:i32`` (12 bytes) then bodySize CommitLog bytes;
                    bodySize 0 is a heartbeat
The master reads only the last complete report of what arrived. The readers here are bounded: a transfer
body over ``max_body`` bytes, or a negative one, is a protocol error (the connection is dropped).

rocketq adds one optional exchange in front, used only when the slave runs with ACL (ha/auth.py): it stays off
the wire otherwise, so either side can be an Apache RocketMQ broker. The 5.x AutoSwitch frames (handshake,
36-byte transfer header with epochs) are another protocol on the same port and would get their own readers.
"""

from __future__ import annotations

import struct

REPORT_SIZE = 8
TRANSFER_HEADER_SIZE = 12
# An Apache RocketMQ slave reads frames into a 4 MiB buffer, so no master sends a bigger one.
MAX_TRANSFER_BODY = 4 * 1024 * 1024

_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")


class HAProtocolError(Exception):
    """The peer broke the protocol; the connection is dropped."""


def encode_report(offset: int) -> bytes:
    return _REPORT.pack(offset)


def encode_transfer_header(phy_offset: int, body_size: int) -> bytes:
    return _HEADER.pack(phy_offset, body_size)


class ReportReader:
    """Master side: the slave's 8-byte reports. feed() returns the newest complete report (None if the
    bytes did not complete one); at most 7 bytes are kept between calls."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        buf = self._partial + bytes(data) if self._partial else bytes(data)
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._partial = buf[whole:]
        if not whole:
            return None
        return _REPORT.unpack_from(buf, whole - REPORT_SIZE)[0]


class TransferReader:
    """Slave side: transfer frames. feed() buffers the bytes; frames() yields each complete
    (phy_offset, body) — body a memoryview valid until the next feed() — and keeps any partial frame."""

    __slots__ = ("_buf", "_pos", "max_body")

    def __init__(self, max_body: int = MAX_TRANSFER_BODY) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_body = max_body

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos:
            del self._buf[: self._pos]  # the frames handed out last time are done with
            self._pos = 0
        self._buf += data

    def frames(self):
        buf = self._buf
        while len(buf) - self._pos >= TRANSFER_HEADER_SIZE:
            offset, size = _HEADER.unpack_from(buf, self._pos)
            if size < 0 or size > self.max_body:
                raise HAProtocolError(f"transfer frame of {size} bytes (limit {self.max_body})")
            if offset < 0:
                raise HAProtocolError(f"transfer frame at negative offset {offset}")
            start = self._pos + TRANSFER_HEADER_SIZE
            if len(buf) - start < size:
                return
            self._pos = start + size
            # the body is a view of the buffer, released once the consumer is back (it must not keep it)
            with memoryview(buf) as view:
                body = view[start : start + size]
                try:
                    yield offset, body
                finally:
                    body.release()
