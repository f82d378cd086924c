"""Message ids: the broker's offsetMsgId, the 4.x client UNIQ_KEY, and the 5.x message id.

offsetMsgId (broker, per stored message): storeHost IP (4 or 16 bytes) + port (int32) + commit log offset
(int64), uppercase hex: 32 chars for IPv4, 56 for IPv6.

UNIQ_KEY (4.x client, property UNIQ_KEY): IP (4 or 16 bytes) + pid (int16) + class loader hash (int32), as a
fixed hex prefix, then ms since the start of the current month (int32, local time like Java's Calendar) +
counter (int16): 32 hex chars with an IPv4 address, 56 with IPv6.

5.x message id: "01" + MAC (6 bytes) + pid (low 2 bytes) + seconds since 2021-01-01T00:00:00Z (uint32) +
counter (uint32): 34 uppercase hex chars.

Clocks are injectable (protocol code never needs a real one in tests).
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import struct
import time
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from typing import NamedTuple

from .frame import ProtocolError

__all__ = [
    "MessageIdV5Generator",
    "MessageIdV5Info",
    "OffsetMsgId",
    "UniqIdGenerator",
    "UniqKeyInfo",
    "decode_offset_msg_id",
    "encode_offset_msg_id",
    "is_offset_msg_id",
    "offset_msg_id_encoder",
    "parse_message_id_v5",
    "parse_uniq_key",
    "uniq_key_timestamp",
]

_HEX = frozenset("0123456789abcdefABCDEF")


def _ip_bytes(host: str | bytes) -> bytes:
    if isinstance(host, bytes):
        if len(host) not in (4, 16):
            raise ValueError(f"an IP address is 4 or 16 bytes, got {len(host)}")
        return host
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        raise ValueError(f"not an IP address: {host!r}") from None


def _ip_str(raw: bytes) -> str:
    if len(raw) == 4:  # the common case, without ipaddress' overhead
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"
    return str(ipaddress.ip_address(raw))


def _unhex(text: str, what: str) -> bytes:
    if not isinstance(text, str) or not _HEX.issuperset(text):
        raise ProtocolError(f"{what} must be hex, got {str(text)[:60]!r}")
    return bytes.fromhex(text)


# ==========================================================================================================
# offsetMsgId
# ==========================================================================================================
class OffsetMsgId(NamedTuple):
    host: str
    port: int
    offset: int  # commit log offset

    @property
    def addr(self) -> str:
        """ "ip:port" (IPv6 in brackets) — the broker address to ask for the message."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def offset_msg_id_encoder(host: str | bytes, port: int) -> Callable[[int], str]:
    """A fast per-store encoder: the host/port hex is computed once, each id costs one format."""
    prefix = (_ip_bytes(host) + struct.pack(">i", port)).hex().upper()

    def encode(offset: int) -> str:
        # the offset as 16 uppercase hex digits (to_bytes + hex: half the cost of a :016X format)
        return prefix + (offset & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big").hex().upper()

    return encode


def encode_offset_msg_id(host: str | bytes, port: int, offset: int) -> str:
    return offset_msg_id_encoder(host, port)(offset)


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Inverse of encode_offset_msg_id; ProtocolError if it is not a 32/56-char hex offsetMsgId."""
    n = len(msg_id) if isinstance(msg_id, str) else -1
    if n not in (32, 56):
        raise ProtocolError(f"offsetMsgId must be 32 or 56 hex chars, got {n}")
    raw = _unhex(msg_id, "offsetMsgId")
    ip_len = 4 if n == 32 else 16
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    return OffsetMsgId(_ip_str(raw[:ip_len]), port, offset)


def is_offset_msg_id(msg_id: str) -> bool:
    try:
        decode_offset_msg_id(msg_id)
    except ProtocolError:
        return False
    return True


# ==========================================================================================================
# UNIQ_KEY (MessageClientIDSetter layout)
# ==========================================================================================================
def _month_bounds(now_s: float, tz: tzinfo | None) -> tuple[float, float]:
    """(start of the month containing now, start of the next month), as epoch seconds in ``tz``."""
    dt = datetime.fromtimestamp(now_s, tz)
    start = dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (start + timedelta(days=32)).replace(day=1)
    return start.timestamp(), nxt.timestamp()


class UniqIdGenerator:
    """UNIQ_KEY generator. Thread-safe enough for asyncio (no awaits inside); cheap per id.

    ip: this client's IP (str or 4/16 bytes); None means a random 4-byte value (Java's fallback).
    tz: the time zone for "start of the month" (None: local, like Java's default Calendar).
    """

    __slots__ = ("_clock", "_counter", "_month_end", "_month_start_ms", "_prefix", "_tz")

    def __init__(
        self,
        ip: str | bytes | None = None,
        *,
        pid: int | None = None,
        class_loader_hash: int | None = None,
        clock: Callable[[], float] = time.time,
        tz: tzinfo | None = None,
        counter_start: int = 0,
    ) -> None:
        ip_raw = _ip_bytes(ip) if ip is not None else random.getrandbits(32).to_bytes(4, "big")
        pid = os.getpid() if pid is None else pid
        loader = random.getrandbits(31) if class_loader_hash is None else class_loader_hash
        self._prefix = (ip_raw + struct.pack(">HI", pid & 0xFFFF, loader & 0xFFFFFFFF)).hex().upper()
        self._clock = clock
        self._tz = tz
        self._counter = itertools.count(counter_start)
        self._month_start_ms = 0
        self._month_end = 0.0

    @property
    def prefix(self) -> str:
        return self._prefix

    def _roll_month(self, now: float) -> None:
        start, end = _month_bounds(now, self._tz)
        self._month_start_ms = int(start * 1000)
        self._month_end = end

    def next_id(self) -> str:
        now = self._clock()
        if now >= self._month_end:
            self._roll_month(now)
        diff = int(now * 1000) - self._month_start_ms
        if -1_000_000 < diff < 0:  # clock stepped back (NTP): Java clamps to 0
            diff = 0
        return f"{self._prefix}{diff & 0xFFFFFFFF:08X}{next(self._counter) & 0xFFFF:04X}"

    __call__ = next_id


class UniqKeyInfo(NamedTuple):
    ip: str
    pid: int
    class_loader_hash: int
    ms_in_month: int
    counter: int


def parse_uniq_key(key: str) -> UniqKeyInfo:
    n = len(key) if isinstance(key, str) else -1
    if n not in (32, 56):
        raise ProtocolError(f"UNIQ_KEY must be 32 or 56 hex chars, got {n}")
    raw = _unhex(key, "UNIQ_KEY")
    ip_len = 4 if n == 32 else 16
    pid, loader, span, counter = struct.unpack_from(">HiIH", raw, ip_len)
    return UniqKeyInfo(_ip_str(raw[:ip_len]), pid, loader, span, counter)


def uniq_key_timestamp(key: str, now_ms: int | None = None, tz: tzinfo | None = None) -> int:
    """Approximate creation time (epoch ms) of a UNIQ_KEY, as Java's getNearlyTimeFromID computes it.

    The id only stores ms since the start of *a* month: assume the current month unless that lands at or
    after ``now``, then the previous one.
    """
    span = parse_uniq_key(key).ms_in_month
    now_s = time.time() if now_ms is None else now_ms / 1000
    start, _ = _month_bounds(now_s, tz)
    start_ms = int(start * 1000)
    if start_ms + span >= now_s * 1000:
        prev = datetime.fromtimestamp(start, tz) - timedelta(days=1)
        start_ms = int(_month_bounds(prev.timestamp(), tz)[0] * 1000)
    return start_ms + span


# ==========================================================================================================
# 5.x message id
# ==========================================================================================================
V5_EPOCH_S = 1609459200  # 2021-01-01T00:00:00Z
V5_VERSION = "01"


class MessageIdV5Info(NamedTuple):
    mac: bytes
    pid: int
    seconds: int  # since 2021-01-01Z
    counter: int

    @property
    def timestamp_s(self) -> int:
        return V5_EPOCH_S + self.seconds


class MessageIdV5Generator:
    """5.x (gRPC) message ids: 01 + MAC + pid + seconds since 2021 + counter, 34 uppercase hex chars."""

    __slots__ = ("_clock", "_counter", "_prefix")

    def __init__(
        self,
        mac: bytes | None = None,
        *,
        pid: int | None = None,
        clock: Callable[[], float] = time.time,
        counter_start: int = 0,
    ) -> None:
        if mac is None:
            mac = random.getrandbits(48).to_bytes(6, "big")
        if len(mac) != 6:
            raise ValueError("a MAC address is 6 bytes")
        pid = os.getpid() if pid is None else pid
        self._prefix = V5_VERSION + (mac + struct.pack(">H", pid & 0xFFFF)).hex().upper()
        self._clock = clock
        self._counter = itertools.count(counter_start)

    def next_id(self) -> str:
        seconds = (int(self._clock()) - V5_EPOCH_S) & 0xFFFFFFFF
        return f"{self._prefix}{seconds:08X}{next(self._counter) & 0xFFFFFFFF:08X}"

    __call__ = next_id


def parse_message_id_v5(msg_id: str) -> MessageIdV5Info:
    if not isinstance(msg_id, str) or len(msg_id) != 34:
        raise ProtocolError("a 5.x message id is 34 hex chars")
    if msg_id[:2] != V5_VERSION:
        raise ProtocolError(f"unknown 5.x message id version {msg_id[:2]!r}")
    raw = _unhex(msg_id[2:], "message id")
    pid, seconds, counter = struct.unpack_from(">HII", raw, 6)
    return MessageIdV5Info(raw[:6], pid, seconds, counter)
