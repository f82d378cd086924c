"""Fuzz targets: every decoder that reads bytes from the network or the disk, behind one interface.

A target takes arbitrary bytes and feeds them to its decoder. Refusing bad input with a ``ValueError``
(``ProtocolError``, ``SqlError``, ``UnicodeDecodeError`` are ones) is the decoder's contract; any other
exception is a finding, and so is a hang (bounded by the runner). The same registry is driven by hypothesis
in CI (tests/fuzz/test_fuzz_decoders.py) and by atheris, coverage-guided, in bench/fuzz_bench.py.

Adding a decoder (the HA port's frames, the gRPC proxy's messages): write ``def fuzz_x(data: bytes) -> None``
and register it with ``@target("area.name", seeds=[...])``; seeds are valid inputs the fuzzers start from.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import orjson

from rocketq.broker import sql92
from rocketq.protocol import bodies, headers, lenient_json, message_id, properties, record, route, tags
from rocketq.protocol._jsonmodel import JsonModel
from rocketq.protocol.frame import FrameDecoder, RemotingCommand, decode_frame
from rocketq.store.dispatch import DispatchRequest, read_dispatch_request
from rocketq.store.recovery import _first_bad_record

Fuzzer = Callable[[bytes], None]


@dataclass
class Target:
    name: str
    fn: Fuzzer
    seeds: list[bytes] = field(default_factory=list)


TARGETS: dict[str, Target] = {}


def target(name: str, seeds: list[bytes] | None = None) -> Callable[[Fuzzer], Fuzzer]:
    def register(fn: Fuzzer) -> Fuzzer:
        TARGETS[name] = Target(name, fn, list(seeds or []))
        return fn

    return register


def run_one(t: Target, data: bytes) -> None:
    """The contract: ValueError (incl. ProtocolError) is a clean refusal; anything else propagates."""
    try:
        t.fn(data)
    except ValueError:
        pass


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# -- frames ---------------------------------------------------------------------------------------
def _frame(header: bytes, body: bytes = b"", serialize: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize << 24) | len(header)) + header + body


_SEND_EXT = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0", "i": "",
             "j": "0", "k": "false"}  # fmt: skip
_REQ = RemotingCommand.request(310, _SEND_EXT, b"body")
_BIN = RemotingCommand(34, ext_fields={"k": "v"}, remark="r", serialize_type=1)


@target("frame.stream", seeds=[_REQ.encode() * 2, _BIN.encode(), _frame(b"{}")])
def fuzz_frame_stream(data: bytes) -> None:
    """The incremental decoder, fed in chunks whose sizes the input chooses; the same frames as one feed."""
    if not data:
        return
    whole = FrameDecoder(64 * 1024)
    try:
        expected = [(c.code, c.opaque, c.ext_fields, c.body_bytes) for c in whole.feed(data[1:])]
    except ValueError:
        expected = None
    dec = FrameDecoder(64 * 1024)
    got = []
    step = data[0] % 17 + 1
    pos = 1
    try:
        while pos < len(data):
            chunk = data[pos : pos + step]
            got += [(c.code, c.opaque, c.ext_fields, c.body_bytes) for c in dec.feed(chunk)]
            pos += step
    except ValueError:
        if expected is not None and len(got) < len(expected):
            # refused mid-stream while one feed was fine: a split-dependent decode
            raise AssertionError("a chunked feed refused what one feed decoded") from None
        return
    if expected is not None:
        assert got == expected, "chunked and whole feeds decoded different frames"


@target("frame.json_header", seeds=[_REQ.encode_header(), b'{"code":310,"extFields":{"b":1}}', b"{}"])
def fuzz_json_header(data: bytes) -> None:
    for cmd in FrameDecoder().feed(_frame(data, b"xyz")):
        if cmd.code in (10, 310, 320, 325):
            headers.SendMessageRequestHeader.of_request(cmd)


@target("frame.binary_header", seeds=[_BIN.encode_header()])
def fuzz_binary_header(data: bytes) -> None:
    decode_frame(struct.pack(">i", (1 << 24) | len(data)) + data)


@target("frame.raw", seeds=[_REQ.encode()[4:]])
def fuzz_decode_frame(data: bytes) -> None:
    decode_frame(data)


# -- typed headers (extFields → header objects) ----------------------------------------------------
_HEADERS = sorted(
    (c for c in vars(headers).values() if isinstance(c, type) and issubclass(c, headers.Header)),
    key=lambda c: c.__name__,
)
_HEADERS = [c for c in _HEADERS if c is not headers.Header]


_V2 = bytes([_HEADERS.index(headers.SendMessageRequestHeaderV2)])
_PULL = bytes([_HEADERS.index(headers.PullMessageRequestHeader)])


@target("headers.ext", seeds=[_V2 + orjson.dumps(_SEND_EXT), _PULL + b'{"topic":"T","queueId":"1"}'])
def fuzz_headers(data: bytes) -> None:
    if not data:
        return
    cls = _HEADERS[data[0] % len(_HEADERS)]
    try:
        obj = orjson.loads(data[1:])
    except orjson.JSONDecodeError:
        obj = dict(p.partition("=")[::2] for p in _text(data[1:]).split("&"))
    if not isinstance(obj, dict):
        return
    ext = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in obj.items()}
    if data[0] & 0x80 and cls._fields:  # aim at the header's own keys
        keys = [f.key for f in cls._fields]
        ext = {keys[i % len(keys)]: v for i, v in enumerate(ext.values())}
    # differential: the generated fast decoder and the reference one agree on what they accept and give
    try:
        fast = cls._fast_decode(ext)
    except Exception:
        fast = None
    try:
        ref = headers._decode(cls, cls._fields, ext)
    except ValueError:
        ref = None
    if fast is not None and ref is not None:
        assert fast.to_ext() == ref.to_ext(), f"{cls.__name__}: fast and reference decoders differ on {ext}"
    elif fast is not None:
        raise AssertionError(f"{cls.__name__}: the fast decoder accepts what the reference refuses: {ext}")
    cls.from_ext(ext)


# -- JSON bodies ------------------------------------------------------------------------------------
_MODELS = [
    c
    for mod in (bodies, route)
    for c in vars(mod).values()
    if isinstance(c, type) and issubclass(c, JsonModel) and c.__module__ == mod.__name__
]
_MODELS.sort(key=lambda c: c.__name__)
_HEARTBEAT = (
    b'{"clientID":"1.2.3.4@1","consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY",'
    b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","unitMode":false,'
    b'"subscriptionDataSet":[{"topic":"T","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1}]}],'
    b'"producerDataSet":[{"groupName":"P"}]}'
)


@target("bodies.json_model", seeds=[b"\x00" + _HEARTBEAT, b'\x01{0:{"a":1}}'])
def fuzz_json_models(data: bytes) -> None:
    if not data:
        return
    _MODELS[data[0] % len(_MODELS)].decode(data[1:])


@target("lenient_json.loads", seeds=[_HEARTBEAT, b'{{"brokerName":"b","queueId":1,"topic":"t"}:{"x":1}}'])
def fuzz_lenient_json(data: bytes) -> None:
    lenient_json.loads(data)


# -- route / registration bodies -------------------------------------------------------------------
_REG = route.RegisterBrokerBody(
    route.TopicConfigSerializeWrapper({"T": route.TopicConfig("T", 4, 4, 6)}, route.DataVersion()), []
)


@target("route.register_body", seeds=[b"\x00" + _REG.encode_body(False), b"\x01" + _REG.encode_body(True)])
def fuzz_register_body(data: bytes) -> None:
    if not data:
        return
    route.RegisterBrokerBody.decode_body(data[1:], bool(data[0] & 1))


@target("route.register_compressed_inner", seeds=[zlib.decompress(_REG.encode_body(True))])
def fuzz_register_compressed_inner(data: bytes) -> None:
    """The compressed form's inner layout, past the inflate (which almost any fuzzed input fails)."""
    route.RegisterBrokerBody.decode_compressed(zlib.compress(data))


@target("route.topic_config_compact", seeds=[b"T 4 4 6 SINGLE_TAG"])
def fuzz_topic_config_compact(data: bytes) -> None:
    route.TopicConfig.decode_compact(_text(data))


# -- properties, records, ids, expressions ---------------------------------------------------------
_PROPS = properties.properties_to_string({"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"})


@target("properties", seeds=[_PROPS.encode(), b"a\x01b\x02"])
def fuzz_properties(data: bytes) -> None:
    properties.decode_properties(data)
    properties.string_to_properties(_text(data))


_RECORD = record.encode_record(b"hello", "T", _PROPS, queue_id=1, born_host=("10.0.0.1", 5))


@target("record.commitlog", seeds=[_RECORD * 2, _RECORD[:40]])
def fuzz_records(data: bytes) -> None:
    """CommitLog records: pull/query/view bodies from the network and the store's files from the disk."""
    record.decode_records(data, verify_crc=True)
    record.decode_records_lenient(data, verify_crc=True)
    if len(data) >= 4:
        record.decode_record(memoryview(data), 0, verify_crc=True)


@target("record.batch", seeds=[record.encode_batch([(b"hello", 0, {"KEYS": "k"}), (b"x", 1, "")])])
def fuzz_batch(data: bytes) -> None:
    record.decode_batch_raw(data)
    record.decode_batch(data)


@target("message_id", seeds=[b"7F0000010000276B0000000000000400", b"7F000001000100000000000000000001"])
def fuzz_message_ids(data: bytes) -> None:
    text = _text(data)
    for parse in (message_id.decode_offset_msg_id, message_id.parse_uniq_key, message_id.parse_message_id_v5):
        try:
            parse(text)
        except ValueError:
            pass


@target("expression.tags", seeds=[b"TagA || TagB", b"*"])
def fuzz_tag_expression(data: bytes) -> None:
    tags.parse_tag_expression(_text(data))


@target("expression.sql92", seeds=[b"a > 5 AND b IN ('x', 'y') OR c IS NULL", b"NOT (x BETWEEN 1 AND 2)"])
def fuzz_sql92(data: bytes) -> None:
    match = sql92.compile_sql(_text(data))
    match({"a": "7", "b": "x", "x": "1.5"})


# -- the store's own readers of its files (disk bytes) -------------------------------------------
def _segment_record(phys: int = 0) -> bytes:
    return record.encode_record(b"hello", "T", _PROPS, queue_id=1, phys_offset=phys)


@target("store.dispatch_request", seeds=[_segment_record() + _segment_record(len(_segment_record()))])
def fuzz_dispatch_request(data: bytes) -> None:
    """What recovery and the dispatcher read from a CommitLog segment, record after record."""
    view = memoryview(data)
    pos = 0
    while pos < len(data):
        r = read_dispatch_request(view, pos, pos, True, [1000, 5000], len(data))
        if not isinstance(r, DispatchRequest) or r.msg_size <= 0:
            return
        pos += r.msg_size


@target("store.recovery_check", seeds=[_segment_record() + _segment_record(len(_segment_record()))])
def fuzz_recovery_check(data: bytes) -> None:
    """The clean-restart check of a segment's records (magic, size, position, CRC, topic)."""
    mf = SimpleNamespace(view=memoryview(data), file_from_offset=0)
    _first_bad_record(mf, len(data), True, lambda *a: True)


# Inputs that found bugs: replayed by tests/fuzz on every run.
REGRESSIONS: list[tuple[str, bytes]] = [
    # an IPv6-host record shorter than its fixed part: struct.error instead of ProtocolError
    (
        "record.commitlog",
        bytes.fromhex(
            "0000005fdaa320a7360000000100fcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfc000000000000"
            "0000000000000000000800000000010000000500008700000000007f000000000000000000000000000000000000000000"
        ),
    ),
    # the same in the store's own reader (recovery, dispatch): a corrupt segment would stop the broker's start
    (
        "store.dispatch_request",
        bytes.fromhex(
            "0000005bdaa320a73610a6860000000100000000000000000000000100000000000000000000ffffffffcbd43194"
            "0000000000000000000568656c6c6f0154001e2600000000007fdaa33510a6860000007f00000100002800000009"
            "000000f700007f000001000000a320da7f007f"
        ),
    ),
]
