"""offsetMsgId, UNIQ_KEY and 5.x message id: golden vectors, round trips, junk."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import ProtocolError
from rocketq.protocol.message_id import (
    MessageIdV5Generator,
    OffsetMsgId,
    UniqIdGenerator,
    decode_offset_msg_id,
    encode_offset_msg_id,
    is_offset_msg_id,
    offset_msg_id_encoder,
    parse_message_id_v5,
    parse_uniq_key,
    uniq_key_timestamp,
)


def test_offset_msg_id_golden_vector() -> None:
    assert encode_offset_msg_id("127.0.0.1", 10091, 1024) == "7F0000010000276B0000000000000400"
    assert decode_offset_msg_id("7F0000010000276B0000000000000400") == OffsetMsgId("127.0.0.1", 10091, 1024)
    assert decode_offset_msg_id("7f0000010000276b0000000000000400").addr == "127.0.0.1:10091"


def test_offset_msg_id_ipv6() -> None:
    mid = encode_offset_msg_id("fe80::1", 10911, 2**40)
    assert len(mid) == 56
    assert mid == "FE800000000000000000000000000001" + "00002A9F" + "0000010000000000"
    d = decode_offset_msg_id(mid)
    assert d == OffsetMsgId("fe80::1", 10911, 2**40)
    assert d.addr == "[fe80::1]:10911"


ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)


@settings(deadline=None)
@given(st.one_of(ipv4, ipv6), st.integers(0, 65535), st.integers(0, 2**63 - 1))
def test_offset_msg_id_round_trip(host: str, port: int, offset: int) -> None:
    mid = offset_msg_id_encoder(host, port)(offset)
    assert mid == mid.upper() and len(mid) == (32 if ":" not in host else 56)
    back = decode_offset_msg_id(mid)
    assert (ipaddress.ip_address(back.host), back.port, back.offset) == (
        ipaddress.ip_address(host),
        port,
        offset,
    )
    assert is_offset_msg_id(mid)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "7F00",
        "7F0000010000276B000000000000040",
        "ZZ0000010000276B0000000000000400",
        "7F000001 000276B0000000000000400",
    ],
)
def test_offset_msg_id_junk(bad: str) -> None:
    with pytest.raises(ProtocolError):
        decode_offset_msg_id(bad)
    assert not is_offset_msg_id(bad)


@settings(deadline=None)
@given(st.text(max_size=60))
def test_offset_msg_id_random_text_only_protocol_error(text: str) -> None:
    try:
        decode_offset_msg_id(text)
    except ProtocolError:
        pass


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_uniq_key_layout_golden() -> None:
    # 2026-11-22T10:00:00.123Z, month start 2026-11-01T00:00Z -> 21 days 10 h 123 ms.
    now = datetime(2026, 11, 22, 10, 0, 0, 123000, tzinfo=UTC).timestamp()
    gen = UniqIdGenerator("10.1.2.3", pid=0x1234, class_loader_hash=0x1B6D3586, clock=FakeClock(now), tz=UTC)
    span = (21 * 86400 + 10 * 3600) * 1000 + 123
    key = gen.next_id()
    assert key == "0A010203" + "1234" + "1B6D3586" + f"{span:08X}" + "0000"
    assert gen.next_id().endswith("0001")
    info = parse_uniq_key(key)
    assert (info.ip, info.pid, info.class_loader_hash, info.ms_in_month, info.counter) == (
        "10.1.2.3",
        0x1234,
        0x1B6D3586,
        span,
        0,
    )
    assert uniq_key_timestamp(key, now_ms=int(now * 1000) + 5000, tz=UTC) == round(now * 1000)


def test_uniq_key_counter_wraps_at_16_bits_and_pid_truncates() -> None:
    gen = UniqIdGenerator("1.2.3.4", pid=0x12345, class_loader_hash=1, counter_start=0xFFFF, tz=UTC)
    a, b = gen.next_id(), gen.next_id()
    assert a.endswith("FFFF") and b.endswith("0000")
    assert parse_uniq_key(a).pid == 0x2345


def test_uniq_key_month_rollover_and_previous_month_decode() -> None:
    clock = FakeClock(datetime(2026, 1, 31, 23, 59, 59, tzinfo=UTC).timestamp())
    gen = UniqIdGenerator("1.2.3.4", pid=1, class_loader_hash=1, clock=clock, tz=UTC)
    jan = gen.next_id()
    clock.t = datetime(2026, 2, 1, 0, 0, 1, tzinfo=UTC).timestamp()
    feb = gen.next_id()
    assert parse_uniq_key(feb).ms_in_month == 1000
    assert parse_uniq_key(jan).ms_in_month == (30 * 86400 + 86399) * 1000
    # Decoded in February, the January id's span is "in the future" for February -> previous month.
    now_ms = int(clock.t * 1000)
    assert uniq_key_timestamp(jan, now_ms=now_ms, tz=UTC) == int(
        datetime(2026, 1, 31, 23, 59, 59, tzinfo=UTC).timestamp() * 1000
    )
    assert uniq_key_timestamp(feb, now_ms=now_ms + 10, tz=UTC) == now_ms


def test_uniq_key_time_zone_matters() -> None:
    tz = timezone(timedelta(hours=8))  # like Asia/Shanghai
    now = datetime(2026, 3, 1, 0, 30, tzinfo=tz).timestamp()
    gen = UniqIdGenerator("1.2.3.4", pid=1, class_loader_hash=1, clock=FakeClock(now), tz=tz)
    assert parse_uniq_key(gen.next_id()).ms_in_month == 30 * 60 * 1000


def test_uniq_key_clock_step_back_clamps_to_zero() -> None:
    clock = FakeClock(datetime(2026, 5, 1, 0, 0, 1, tzinfo=UTC).timestamp())
    gen = UniqIdGenerator("1.2.3.4", pid=1, class_loader_hash=1, clock=clock, tz=UTC)
    gen.next_id()
    clock.t -= 2  # NTP step into the previous month
    assert parse_uniq_key(gen.next_id()).ms_in_month == 0


def test_uniq_key_ipv6_and_defaults() -> None:
    key = UniqIdGenerator("::1", pid=1, class_loader_hash=2)()
    assert len(key) == 56 and parse_uniq_key(key).ip == "::1"
    a, b = UniqIdGenerator(), UniqIdGenerator()
    ka, kb = a(), b()
    assert len(ka) == 32 and ka != kb and len({a() for _ in range(1000)}) == 1000


@pytest.mark.parametrize("bad", ["", "00", "G" * 32, "0" * 31, "0" * 57])
def test_uniq_key_junk(bad: str) -> None:
    with pytest.raises(ProtocolError):
        parse_uniq_key(bad)


def test_message_id_v5_layout() -> None:
    t = datetime(2026, 11, 22, tzinfo=UTC).timestamp()
    gen = MessageIdV5Generator(
        bytes.fromhex("AABBCCDDEEFF"), pid=0x10203, clock=FakeClock(t), counter_start=7
    )
    mid = gen.next_id()
    seconds = int(t) - 1609459200
    assert mid == "01" + "AABBCCDDEEFF" + "0203" + f"{seconds:08X}" + "00000007"
    assert len(mid) == 34
    info = parse_message_id_v5(mid)
    assert (info.mac, info.pid, info.seconds, info.counter, info.timestamp_s) == (
        bytes.fromhex("AABBCCDDEEFF"),
        0x0203,
        seconds,
        7,
        int(t),
    )
    assert gen.next_id().endswith("00000008")


@pytest.mark.parametrize("bad", ["", "02" + "0" * 32, "01" + "X" * 32, "01" + "0" * 31])
def test_message_id_v5_junk(bad: str) -> None:
    with pytest.raises(ProtocolError):
        parse_message_id_v5(bad)


@settings(deadline=None)
@given(st.integers(-(2**63), 2**64 - 1))
def test_offset_msg_id_encoder_matches_a_hex_format(offset: int) -> None:
    enc = offset_msg_id_encoder("10.1.2.3", 10911)
    assert enc(offset) == f"0A01020300002A9F{offset & 0xFFFFFFFFFFFFFFFF:016X}"
