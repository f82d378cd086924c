"""Pull bodies (concatenated 17-field records, specs/remoting-v4.md §5) -> Arrow record batches.

The hot path of read(): one struct unpack per record for the fixed fields, one split of the property
string;
bodies are gathered into one contiguous buffer and handed to Arrow as (offsets, data) without per-row objects.
The batch schema must equal the DataFrame schema exactly (nullable, timestamp[us, UTC], map<string,string>).
"""

from __future__ import annotations

import struct
from itertools import accumulate

import pyarrow as pa

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

DDL = (
    "topic string, brokerName string, queueId int, queueOffset long, msgId string, tags string, "
    "keys array<string>, body binary, properties map<string,string>, bornTimestamp timestamp, "
    "storeTimestamp timestamp, reconsumeTimes int, flag int"
)

_HEAD = rec.HEADER  # fields 1..14 + body length, IPv4 hosts
_I16 = struct.Struct(">h")
_HOST_V6 = sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG
_US = 1000


class BatchBuilder:
    """Accumulates records of ONE queue and emits record batches of the exact Spark schema."""

    __slots__ = (
        "bodies",
        "born",
        "broker",
        "flags",
        "key_lists",
        "msg_ids",
        "offsets",
        "prop_keys",
        "prop_offsets",
        "prop_vals",
        "queue_id",
        "recon",
        "store",
        "tags",
        "topic",
    )

    def __init__(self, topic: str, broker: str, queue_id: int) -> None:
        self.topic = topic
        self.broker = broker
        self.queue_id = queue_id
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.msg_ids: list[str] = []
        self.tags: list[str | None] = []
        self.key_lists: list[list[str] | None] = []
        self.bodies: list[bytes | memoryview] = []
        self.prop_keys: list[str] = []
        self.prop_vals: list[str] = []
        self.prop_offsets: list[int] = [0]
        self.born: list[int] = []
        self.store: list[int] = []
        self.recon: list[int] = []
        self.flags: list[int] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_body(self, view: memoryview, end_offset: int) -> int:
        """Append every record of a pull body with queueOffset < end_offset; returns how many."""
        n0 = len(self.offsets)
        pos, end = 0, len(view)
        unpack = _HEAD.unpack_from
        offsets, msg_ids, tags, key_lists, bodies = (
            self.offsets,
            self.msg_ids,
            self.tags,
            self.key_lists,
            self.bodies,
        )
        pk, pv, po = self.prop_keys, self.prop_vals, self.prop_offsets
        born, store, recon, flags = self.born, self.store, self.recon, self.flags
        while pos < end:
            (size, magic, _crc, _qid, flag, qoff, phys, sysf, bts, _bh, _bp, sts, sh, sp, rt, _pto, blen) = (
                unpack(view, pos)
            )
            if magic != rec.MAGIC_CODE_V1 or sysf & _HOST_V6:
                m = rec.decode_record(view, pos)  # rare layouts: the general decoder
                qoff, flag, sysf, bts, sts, rt = (
                    m.queue_offset,
                    m.flag,
                    m.sys_flag,
                    m.born_timestamp,
                    m.store_timestamp,
                    m.reconsume_times,
                )
                body = m.body
                props_raw = bytes(m.properties_raw)
                offset_id = m.offset_msg_id
            else:
                b0 = pos + 88
                body = view[b0 : b0 + blen]
                t = b0 + blen
                tlen = view[t]
                p = t + 1 + tlen
                plen = _I16.unpack_from(view, p)[0]
                props_raw = bytes(view[p + 2 : p + 2 + plen])
                offset_id = None
            pos += size
            if qoff >= end_offset:
                continue
            if sysf & sf.COMPRESSED_FLAG:
                body = rec.decompress_body(body, sysf)
            offsets.append(qoff)
            bodies.append(body)
            tag = keys = uniq = None
            if props_raw:
                for seg in props_raw.decode("utf-8", "replace").split("\x02"):
                    k, _, v = seg.partition("\x01")
                    if not _:
                        continue
                    pk.append(k)
                    pv.append(v)
                    if k == "TAGS":
                        tag = v
                    elif k == "KEYS":
                        keys = v.split()
                    elif k == "UNIQ_KEY":
                        uniq = v
            po.append(len(pk))
            tags.append(tag)
            key_lists.append(keys if keys is not None else [])
            if uniq is None:
                uniq = offset_id or (sh + struct.pack(">iq", sp, phys)).hex().upper()
            msg_ids.append(uniq)
            born.append(bts * _US)
            store.append(sts * _US)
            recon.append(rt)
            flags.append(flag)
        return len(self.offsets) - n0

    def build(self) -> pa.RecordBatch:
        n = len(self.offsets)
        bodies = self.bodies
        data = b"".join(bodies)
        boffs = pa.array([0, *accumulate(len(b) for b in bodies)], pa.int32())
        body_arr = pa.BinaryArray.from_buffers(pa.binary(), n, [None, boffs.buffers()[1], pa.py_buffer(data)])
        props = pa.MapArray.from_arrays(
            pa.array(self.prop_offsets, pa.int32()),
            pa.array(self.prop_keys, pa.string()),
            pa.array(self.prop_vals, pa.string()),
        )
        ts = pa.timestamp("us", tz="UTC")
        cols = [
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.broker] * n, pa.string()),
            pa.array([self.queue_id] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.msg_ids, pa.string()),
            pa.array(self.tags, pa.string()),
            pa.array(self.key_lists, SCHEMA.field("keys").type),
            body_arr,
            props,
            pa.array(self.born, pa.int64()).cast(ts),
            pa.array(self.store, pa.int64()).cast(ts),
            pa.array(self.recon, pa.int32()),
            pa.array(self.flags, pa.int32()),
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(cols, schema=SCHEMA)
