"""The HA wire format byte by byte, as specs/ha.md describes RocketMQ's classic protocol, and rocketq's
optional auth frames."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.ha import auth
from rocketq.ha.frames import (
    MAX_TRANSFER_BODY,
    REPORT_SIZE,
    TRANSFER_HEADER_SIZE,
    HAProtocolError,
    ReportReader,
    TransferReader,
    encode_report,
    encode_transfer_header,
)


def test_report_is_one_big_endian_int64():
    assert REPORT_SIZE == 8
    assert encode_report(0) == b"\0" * 8
    assert encode_report(0x0102030405060708) == bytes([1, 2, 3, 4, 5, 6, 7, 8])
    assert encode_report(1 << 30) == b"\x00\x00\x00\x00\x40\x00\x00\x00"


def test_transfer_header_is_offset_int64_then_size_int32():
    assert TRANSFER_HEADER_SIZE == 12
    h = encode_transfer_header(0x1122334455667788, 32768)
    assert h == bytes.fromhex("1122334455667788") + bytes.fromhex("00008000")
    assert encode_transfer_header(1 << 30, 0) == bytes.fromhex("0000000040000000") + b"\0\0\0\0"  # heartbeat


def test_master_keeps_only_the_last_complete_report():
    r = ReportReader()
    assert r.feed(encode_report(5)[:3]) is None  # a partial report is kept
    assert r.feed(encode_report(5)[3:]) == 5
    # three reports and a half in one read: the newest whole one counts
    data = encode_report(7) + encode_report(8) + encode_report(9) + encode_report(10)[:4]
    assert r.feed(data) == 9
    assert r.feed(encode_report(10)[4:]) == 10


@given(st.lists(st.integers(0, 1 << 62), min_size=1, max_size=20), st.data())
def test_report_reader_any_split(offsets, data):
    stream = b"".join(encode_report(o) for o in offsets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    r = ReportReader()
    seen = None
    prev = 0
    for c in [*cuts, len(stream)]:
        got = r.feed(stream[prev:c])
        prev = c
        if got is not None:
            seen = got
    assert seen == offsets[-1]


def frames_of(reader: TransferReader, *chunks: bytes) -> list[tuple[int, bytes]]:
    out = []
    for c in chunks:
        reader.feed(c)
        out += [(o, bytes(b)) for o, b in reader.frames()]
    return out


def test_slave_reads_frames_split_anywhere():
    stream = (
        encode_transfer_header(1 << 20, 5) + b"hello"
        + encode_transfer_header((1 << 20) + 5, 0)  # heartbeat
        + encode_transfer_header((1 << 20) + 5, 3) + b"abc"
    )  # fmt: skip
    for cut in range(len(stream) + 1):
        got = frames_of(TransferReader(), stream[:cut], stream[cut:])
        assert got == [(1 << 20, b"hello"), ((1 << 20) + 5, b""), ((1 << 20) + 5, b"abc")], cut


def test_slave_refuses_oversized_and_negative_frames():
    r = TransferReader()
    assert r.max_body == MAX_TRANSFER_BODY == 4 << 20
    r.feed(encode_transfer_header(0, MAX_TRANSFER_BODY + 1))
    with pytest.raises(HAProtocolError, match="limit"):
        list(r.frames())
    r = TransferReader()
    r.feed(encode_transfer_header(0, -1))
    with pytest.raises(HAProtocolError):
        list(r.frames())
    r = TransferReader()
    r.feed(encode_transfer_header(-5, 1) + b"x")
    with pytest.raises(HAProtocolError, match="negative"):
        list(r.frames())


def test_frame_bodies_are_released_after_use():
    r = TransferReader()
    kept = []
    r.feed(encode_transfer_header(0, 2) + b"ab")
    for _, body in r.frames():
        kept.append(body)
    with pytest.raises(ValueError):
        bytes(kept[0])  # released: the buffer may be reused
    r.feed(encode_transfer_header(2, 1) + b"c")  # the consumed frame's bytes can go now
    assert [(o, bytes(b)) for o, b in r.frames()] == [(2, b"c")]
    assert r.buffered == 0


def test_auth_frames():
    assert auth.HELLO == b"\xffRQHAUTH" and auth.MAGIC < 0  # never a classic report
    nonce = bytes(range(16))
    ch = auth.encode_challenge(True, nonce)
    assert len(ch) == auth.CHALLENGE_SIZE == 28
    assert ch == auth.HELLO + b"\0\0\0\1" + nonce
    assert auth.parse_challenge(ch[:27]) is None
    assert auth.parse_challenge(ch) == (True, nonce)
    assert auth.parse_challenge(auth.encode_challenge(False, nonce)) == (False, nonce)
    with pytest.raises(auth.HAAuthError):
        auth.parse_challenge(b"\0" * 28)
    creds = auth.Credentials("rocketq2", "12345678")
    proof = auth.encode_proof(creds, nonce)
    mac = hmac.new(b"12345678", nonce + b"rocketq2", hashlib.sha256).digest()
    assert proof == auth.HELLO + b"\x00\x08" + b"rocketq2" + mac
    assert auth.parse_proof(proof[:-1]) is None
    assert auth.parse_proof(proof + b"rest") == ("rocketq2", mac, len(proof))


def test_master_auth_checks_account_mac_and_admin():
    accounts = {"admin1": ("secret-1", True), "user1": ("secret-2", False)}
    ma = auth.MasterAuth(lambda ip: ip == "10.0.0.9", accounts.get)
    nonce = auth.new_nonce()
    assert ma.check("admin1", auth.mac_of("secret-1", nonce, "admin1"), nonce) is None
    assert "does not match" in ma.check("admin1", auth.mac_of("wrong", nonce, "admin1"), nonce)
    assert "does not match" in ma.check("admin1", auth.mac_of("secret-1", auth.new_nonce(), "admin1"), nonce)
    assert "not admin" in ma.check("user1", auth.mac_of("secret-2", nonce, "user1"), nonce)
    assert "no acl account" in ma.check("nobody", b"x" * 32, nonce)
    assert ma.is_white("10.0.0.9") and not ma.is_white("10.0.0.8")


def test_credentials_parse():
    assert auth.Credentials.parse("") is None
    c = auth.Credentials.parse('{"accessKey":"a","secretKey":"bbbbbb"}')
    assert c == auth.Credentials("a", "bbbbbb")
    with pytest.raises(ValueError):
        auth.Credentials.parse('{"accessKey":"a"}')
    with pytest.raises(ValueError):
        auth.Credentials.parse("not json")
