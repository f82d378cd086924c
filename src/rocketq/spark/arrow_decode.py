"""Pull bodies (concatenated 17-field records, specs/remoting-v4.md §5) -> Arrow record batches.

The hot path of read(): one struct unpack per record for the fixed fields, one split of the property
string;
bodies are gathered into one contiguous buffer and handed to Arrow as (offsets, data) without per-row objects.
The batch schema must equal the DataFrame schema exactly (nullable, timestamp[us, UTC], map<string,string>).
"""

from __future__ import annotations

import struct
from itertools import accumulate

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.protocol import record as rec
from rocketq.protocol import sysflag as sf

SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("brokerName", pa.string()),
        pa.field("queueId", pa.int32()),
        pa.field("queueOffset", pa.int64()),
        pa.field("msgId", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.list_(pa.field("element", pa.string()))),
        pa.field("body", pa.binary()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("bornTimestamp", pa.timestamp("us", tz="UTC")),
        pa.field("storeTimestamp", pa.timestamp("us", tz="UTC")),
        pa.field("reconsumeTimes", pa.int32()),
        pa.field("flag", pa.int32()),
    ]
)

SCHEMA_NO_PROPERTIES = pa.schema([f for f in SCHEMA if f.name != "properties"])

DDL = (
    "topic string, brokerName string, queueId int, queueOffset long, msgId string, tags string, "
    "keys array<string>, body binary, properties map<string,string>, bornTimestamp timestamp, "
    "storeTimestamp timestamp, reconsumeTimes int, flag int"
)
DDL_NO_PROPERTIES = DDL.replace(" properties map<string,string>,", "")

_HEAD = rec.HEADER  # fields 1..14 + body length, IPv4 hosts
_I16 = struct.Struct(">h")
_HOST_V6 = sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG
_PORT = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _concat(parts: list) -> tuple[pa.Buffer, pa.Buffer]:
    """(int32 offsets buffer, data buffer) of a binary array made of the given slices (one copy)."""
    offs = pa.array([0, *accumulate(map(len, parts))], pa.int32())
    return offs.buffers()[1], pa.py_buffer(b"".join(parts))


def _extract(props: pa.Array, key: str) -> pa.Array:
    """Value of one property per row (null when absent), vectorized over the raw property strings."""
    m = pc.extract_regex(props, f"(?:^|\x02){key}\x01(?P<v>[^\x02]*)")
    return pc.if_else(pc.is_valid(m), pc.struct_field(m, [0]), pa.scalar(None, pa.string()))


def _properties_map(props: pa.Array) -> pa.MapArray:
    """\x02-separated key\x01value pairs -> map<string,string>; segments without \x01 are skipped."""
    parts = pc.split_pattern(props, "\x02")
    kv = pc.split_pattern(pc.list_flatten(parts), "\x01", max_splits=1)
    valid = pc.equal(pc.list_value_length(kv), 2)
    cum = np.concatenate(([0], np.cumsum(valid.to_numpy(zero_copy_only=False), dtype=np.int32)))
    offsets = cum[parts.offsets.to_numpy()]
    good = pc.filter(kv, valid)
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pc.list_element(good, 0), pc.list_element(good, 1)
    )


class BatchBuilder:
    """Accumulates records of ONE queue and emits record batches of the exact Spark schema.

    The per-record Python work is one header unpack and two slices; properties (tags, keys, msgId, the map)
    are parsed column-wise by Arrow compute kernels in build()."""

    __slots__ = ("bodies", "born", "broker", "fallback_ids", "flags", "include_properties", "odd_ids",
                 "offsets", "props", "queue_id", "recon", "store", "store_host", "topic")  # fmt: skip

    def __init__(self, topic: str, broker: str, queue_id: int, include_properties: bool = True) -> None:
        self.include_properties = include_properties
        self.topic = topic
        self.broker = broker
        self.queue_id = queue_id
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.bodies: list[bytes | memoryview] = []
        self.props: list[bytes | memoryview] = []
        self.born: list[int] = []
        self.store: list[int] = []
        self.recon: list[int] = []
        self.flags: list[int] = []
        # for rows without UNIQ_KEY the msgId is the offsetMsgId: store host + commit-log offset
        self.fallback_ids: list[int] = []  # commit-log offsets
        self.store_host = b""
        self.odd_ids: dict[int, str] = {}  # row -> offsetMsgId of records with unusual layouts

    def __len__(self) -> int:
        return len(self.offsets)

    def add_body(self, view: memoryview, end_offset: int) -> int:
        """Append every record of a pull body with queueOffset < end_offset; returns how many."""
        n0 = len(self.offsets)
        pos, end = 0, len(view)
        unpack = _HEAD.unpack_from
        i16 = _I16.unpack_from
        offsets, bodies, props = self.offsets, self.bodies, self.props
        born, store, recon, flags, ids = self.born, self.store, self.recon, self.flags, self.fallback_ids
        v1 = rec.MAGIC_CODE_V1
        while pos < end:
            (size, magic, _crc, _qid, flag, qoff, phys, sysf, bts, _bh, _bp, sts, sh, sp, rt, _pto, blen) = (
                unpack(view, pos)
            )
            if magic != v1 or sysf & _HOST_V6:
                m = rec.decode_record(view, pos)  # rare layouts: the general decoder
                qoff, flag, sysf, bts, sts, rt = (
                    m.queue_offset, m.flag, m.sys_flag, m.born_timestamp, m.store_timestamp, m.reconsume_times
                )  # fmt: skip
                body = m.body
                praw = m.properties_raw
                oid = m.offset_msg_id
            else:
                b0 = pos + 88
                body = view[b0 : b0 + blen]
                p = b0 + blen + 1 + view[b0 + blen]
                praw = view[p + 2 : p + 2 + i16(view, p)[0]]
                oid = None
            pos += size
            if qoff >= end_offset:
                continue
            if sysf & sf.COMPRESSED_FLAG:
                body = rec.decompress_body(body, sysf)
            if oid is not None:
                self.odd_ids[len(offsets)] = oid
            elif not self.store_host:
                self.store_host = sh + _PORT.pack(sp)
            offsets.append(qoff)
            bodies.append(body)
            props.append(praw)
            ids.append(phys)
            born.append(bts)
            store.append(sts)
            recon.append(rt)
            flags.append(flag)
        return len(self.offsets) - n0

    def build(self) -> pa.RecordBatch:
        n = len(self.offsets)
        body_arr = pa.BinaryArray.from_buffers(pa.binary(), n, [None, *_concat(self.bodies)])
        props = pa.StringArray.from_buffers(n, *_concat(self.props))
        keys = pc.split_pattern(_extract(props, "KEYS"), " ")
        keys = pc.fill_null(keys, pa.scalar([], keys.type)).cast(SCHEMA.field("keys").type)
        msg_ids = _extract(props, "UNIQ_KEY")
        if msg_ids.null_count:
            ids = msg_ids.to_pylist()
            for i, v in enumerate(ids):
                if v is None:
                    ids[i] = (
                        self.odd_ids.get(i)
                        or (self.store_host + _I64.pack(self.fallback_ids[i])).hex().upper()
                    )
            msg_ids = pa.array(ids, pa.string())
        ts = pa.timestamp("us", tz="UTC")
        cols = [
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.broker] * n, pa.string()),
            pa.array([self.queue_id] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            msg_ids,
            _extract(props, "TAGS"),
            keys,
            body_arr,
            *((_properties_map(props),) if self.include_properties else ()),
            pc.multiply(pa.array(self.born, pa.int64()), 1000).cast(ts),
            pc.multiply(pa.array(self.store, pa.int64()), 1000).cast(ts),
            pa.array(self.recon, pa.int32()),
            pa.array(self.flags, pa.int32()),
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(
            cols, schema=SCHEMA if self.include_properties else SCHEMA_NO_PROPERTIES
        )
