"""SendOkResponse (the send path's templated answer) encodes exactly like the generic RemotingCommand."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.broker.processors.send import send_ok_response
from rocketq.protocol.codes import FLAG_RESPONSE, ResponseCode, SerializeType
from rocketq.protocol.frame import FrameDecoder, RemotingCommand

_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_hex_id = st.text("0123456789ABCDEF", min_size=32, max_size=32)
_codes = st.sampled_from(
    [ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE, 0, 12]
)


def _strings(region: str, trace_on: str) -> tuple[str, str, bytes, bytes]:
    return region, trace_on, orjson.dumps(region), orjson.dumps(trace_on)


def _generic(req: RemotingCommand, code: int, msg_id: str, qid: int, qoff: int, region: str, trace: str):
    ext = {
        "msgId": msg_id,
        "queueId": str(qid),
        "queueOffset": str(qoff),
        "MSG_REGION": region,
        "TRACE_ON": trace,
    }
    return req.response(code, None, ext)


@settings(max_examples=300, deadline=None)
@given(
    code=_codes,
    opaque=_i32,
    stype=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
    ids=st.lists(_hex_id, min_size=1, max_size=3),
    qid=_i32,
    qoff=_i64,
    region=st.text(max_size=12),  # any text: quotes, control characters, non-ASCII
    trace=st.sampled_from(["true", "false"]) | st.text(max_size=5),
)
def test_same_frame_as_the_generic_response(code, opaque, stype, ids, qid, qoff, region, trace):
    req = RemotingCommand.request(310, {"a": "g"}, b"body")
    req.opaque = opaque
    req.serialize_type = stype
    msg_id = ",".join(ids)
    fast = send_ok_response(req, code, msg_id, qid, qoff, _strings(region, trace))
    slow = _generic(req, code, msg_id, qid, qoff, region, trace)
    for r in (fast, slow):  # what Channel._reply does
        r.opaque = req.opaque
        r.flag |= FLAG_RESPONSE
    assert b"".join(fast.frame_parts()) == b"".join(slow.frame_parts())
    (back,) = FrameDecoder().feed(fast.encode())
    assert back.ext_fields == slow.ext_fields and back.code == code and back.opaque == opaque


def test_ext_fields_read_or_changed_takes_the_generic_encoder():
    req = RemotingCommand.request(310, {})
    req.opaque = 9
    fast = send_ok_response(req, 0, "AB" * 16, 1, 2, _strings("DefaultRegion", "true"))
    slow = _generic(req, 0, "AB" * 16, 1, 2, "DefaultRegion", "true")
    assert fast.ext_fields == slow.ext_fields
    fast.ext_fields["transactionId"] = slow.ext_fields["transactionId"] = "tx-1"
    assert fast.encode() == slow.encode()
    fast.ext_fields = {"x": "y"}
    slow.ext_fields = {"x": "y"}
    assert fast.encode() == slow.encode()


def test_remark_language_and_body_take_the_generic_encoder():
    req = RemotingCommand.request(310, {})
    for change in ({"remark": "r"}, {"language": "PYTHON"}, {"body": b"xyz"}, {"body": [memoryview(b"ab")]}):
        fast = send_ok_response(req, 0, "CD" * 16, 3, 4, _strings("R", "true"))
        slow = _generic(req, 0, "CD" * 16, 3, 4, "R", "true")
        for r in (fast, slow):
            for k, v in change.items():
                setattr(r, k, v)
        assert fast.encode() == slow.encode(), change


def test_message_to_store_field_order_the_send_path_passes_positionally():
    import dataclasses

    from rocketq.store import MessageToStore

    assert [f.name for f in dataclasses.fields(MessageToStore)] == [
        "topic", "queue_id", "body", "flag", "properties", "sys_flag", "born_timestamp", "born_host",
        "reconsume_times", "prepared_transaction_offset", "tags_code", "properties_raw",
    ]  # fmt: skip
