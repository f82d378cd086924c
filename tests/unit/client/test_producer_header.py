"""SendMessageRequestHeaderV2 built by the producer (its constant part is cached per topic and queue)."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from rocketq.client import producer as producer_mod
from rocketq.client.message import Message, MessageQueue
from rocketq.client.producer import Producer
from rocketq.client.route import LatencyFaultTolerance
from rocketq.client.send_request import SendRequest, send_request
from rocketq.protocol.codes import FLAG_ONEWAY, RequestCode
from rocketq.protocol.frame import FrameDecoder, RemotingCommand
from rocketq.protocol.properties import properties_to_string, string_to_properties


def test_header_fields_and_cache_does_not_leak_between_messages() -> None:
    p = Producer("PG", namesrv="127.0.0.1:9876")
    before = int(time.time() * 1000)
    h1 = p._header("T", 3, 0, 0, {"UNIQ_KEY": "U1", "WAIT": "true"}, False)
    h2 = p._header("T", 3, 0x3, 7, {"KEYS": "k"}, False)
    h3 = p._header("%RETRY%G", 0, 0, 0, {"RECONSUME_TIME": "2", "MAX_RECONSUME_TIMES": "5", "a": "1"}, False)
    h4 = p._header("T", 3, 0, 0, {}, True)
    assert before <= int(h1["g"]) <= int(time.time() * 1000)
    h1.pop("g"), h2.pop("g"), h3.pop("g"), h4.pop("g")
    common = {"a": "PG", "c": "TBW102", "d": "4", "k": "false"}
    assert h1 == {**common, "b": "T", "e": "3", "f": "0", "h": "0", "i": "UNIQ_KEY\x01U1\x02WAIT\x01true",
                  "j": "0", "m": "false"}  # fmt: skip
    assert h2 == {**common, "b": "T", "e": "3", "f": "3", "h": "7", "i": "KEYS\x01k", "j": "0", "m": "false"}
    assert h3 == {**common, "b": "%RETRY%G", "e": "0", "f": "0", "h": "0", "i": "a\x011", "j": "2", "l": "5",
                  "m": "false"}  # fmt: skip
    assert h4 == {**common, "b": "T", "e": "3", "f": "0", "h": "0", "i": "", "j": "0", "m": "true"}
    # a later send to the same queue starts from the clean template again
    h5 = p._header("T", 3, 0, 0, {}, False)
    assert (h5["f"], h5["h"], h5["i"], "l" in h5) == ("0", "0", "", False)
    p.group = "PG2"  # attributes changed after the first send are honoured
    assert p._header("T", 3, 0, 0, {}, False)["a"] == "PG2"


def test_fault_duration_table() -> None:
    f = LatencyFaultTolerance.not_available_duration_ms
    assert [f(x) for x in (0, 49, 50, 549, 550, 999, 1000, 2999, 15000, 30000)] == [
        0, 0, 0, 0, 30000, 30000, 60000, 120000, 600000, 600000,
    ]  # fmt: skip


# -- the single-message request's templated JSON header ------------------------------------------------
group_names = st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=20)
topics = st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=30).filter(
    lambda t: not t.startswith("%RETRY%")
)
ints32 = st.integers(-(2**31), 2**31 - 1)


@given(
    group=group_names,
    topic=topics,
    queue_id=st.integers(0, 1023),
    sys_flag=ints32,
    msg_flag=ints32,
    props=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=40), max_size=4),
    opaque=st.integers(0, 2**31 - 1),
    oneway=st.booleans(),
    reply=st.booleans(),
)
def test_send_request_header_is_the_generic_encoders_bytes(
    group, topic, queue_id, sys_flag, msg_flag, props, opaque, oneway, reply
) -> None:
    p = Producer(group, namesrv="127.0.0.1:9876")
    code = RequestCode.SEND_REPLY_MESSAGE_V2 if reply else RequestCode.SEND_MESSAGE_V2
    born = time.time_ns() // 1_000_000
    req = send_request(
        code, p._template(topic, queue_id, False), sys_flag, born, msg_flag, properties_to_string(props), b"x"
    )
    req.opaque = opaque
    req.flag = FLAG_ONEWAY if oneway else 0
    fast = req.frame_parts()
    # the same request through the generic encoder: _header's dict with this send's timestamp
    ext = p._header(topic, queue_id, sys_flag, msg_flag, dict(props), False)
    ext["g"] = str(born)
    plain = RemotingCommand(code, opaque=opaque, flag=req.flag, ext_fields=ext, body=b"x")
    assert fast == plain.frame_parts()
    assert req.ext_fields == ext  # built on first access, equal to _header's
    decoded = FrameDecoder().feed(b"".join(fast))[0]
    assert (decoded.code, decoded.opaque, decoded.ext_fields) == (code, opaque, ext)


def test_send_request_sends_what_a_hook_changed() -> None:
    p = Producer("PG", namesrv="127.0.0.1:9876")
    req = send_request(RequestCode.SEND_MESSAGE_V2, p._template("T", 0, False), 0, 1, 0, "WAIT\x01true", b"b")
    req.ext_fields["AccessKey"] = "ak"  # what an RPC hook (the ACL signer) does before the write
    req.ext_fields["Signature"] = "sig"
    decoded = FrameDecoder().feed(req.encode())[0]
    assert decoded.ext_fields["AccessKey"] == "ak" and decoded.ext_fields["Signature"] == "sig"
    assert decoded.ext_fields["b"] == "T" and decoded.ext_fields["i"] == "WAIT\x01true"


def test_build_request_uses_the_template_except_for_retry_topics() -> None:
    p = Producer("PG", namesrv="127.0.0.1:9876")
    msg = Message("T", b"body", keys="k1")
    req, uniq = p._build_request(msg, MessageQueue("T", "broker-a", 2))
    assert isinstance(req, SendRequest)
    ext = FrameDecoder().feed(req.encode())[0].ext_fields
    assert (ext["b"], ext["e"]) == ("T", "2")
    assert string_to_properties(ext["i"])["UNIQ_KEY"] == uniq
    retry = Message("%RETRY%G", b"body")
    retry.properties["RECONSUME_TIME"] = "3"
    req, _ = p._build_request(retry, MessageQueue("%RETRY%G", "broker-a", 0))
    assert not isinstance(req, SendRequest)
    assert req.ext_fields["j"] == "3"


class _OneId:
    """Stands in for UNIQ_IDS: the same id every time."""

    def next_id(self) -> str:
        return "C0A80001000000000000000000000001"


_tag = st.one_of(st.none(), st.text(max_size=6))
_user_props = st.dictionaries(
    st.sampled_from(["a", "TRAN_MSG", "MSG_TYPE", "UNIQ_KEY", "WAIT"]), st.text(max_size=4), max_size=2
)


@given(
    tags=_tag,
    keys=st.one_of(st.none(), st.lists(st.text(alphabet="abc ", max_size=4), max_size=3)),
    delay=st.integers(min_value=-1, max_value=18),
    user=st.one_of(st.just({}), _user_props),
    size=st.sampled_from([0, 1, 4095, 4096, 5000]),
    topic=st.sampled_from(["T", "%RETRY%G"]),
    flag=st.integers(min_value=0, max_value=3),
)
def test_a_message_without_user_properties_gets_the_general_paths_request(
    tags: str | None,
    keys: list[str] | None,
    delay: int,
    user: dict[str, str],
    size: int,
    topic: str,
    flag: int,
) -> None:
    # _build_request's short cut (no dict of properties) against the general case, with the same id and time
    p = Producer("PG", namesrv="127.0.0.1:9876")
    mq = MessageQueue(topic, "broker-a", 1)
    made = []
    for build in (p._build_request, p._build_single_request):
        msg = Message(topic, b"x" * size, tags=tags, keys=keys, properties=user, delay_level=delay, flag=flag)
        orig = producer_mod.UNIQ_IDS
        producer_mod.UNIQ_IDS = _OneId()
        try:
            req, uniq = build(msg, mq)
        finally:
            producer_mod.UNIQ_IDS = orig
        req.opaque = 9
        if isinstance(req, SendRequest):
            req._born_ts = 1
        else:
            req.ext_fields["g"] = "1"
        made.append((req.code, req.encode(), uniq, msg.properties))
    assert made[0] == made[1]


def test_send_result_field_order_the_send_path_passes_positionally() -> None:
    import dataclasses

    from rocketq.client.message import SendResult

    assert [f.name for f in dataclasses.fields(SendResult)] == [
        "status", "msg_id", "offset_msg_id", "queue", "queue_offset", "transaction_id", "region_id",
        "trace_on",
    ]  # fmt: skip
