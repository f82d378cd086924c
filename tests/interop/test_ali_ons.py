"""Interop with ali-ons 3.12.0 (the npm RocketMQ 4.x client) against a real `rocketq standalone`.

The node side lives in tests/interop/node (producer.js / consumer.js print JSON lines). Topics are created
with our mqadmin first: ali-ons cannot auto-create them (specs/remoting-v4.md §7).
"""

from __future__ import annotations

import hashlib
import time
import zlib
from collections.abc import Iterator

import pytest

from rocketq.admin import MQAdminExt
from rocketq.admin.client import new_uniq_key
from rocketq.admin.records import StoredMessage, encode_properties
from rocketq.protocol.codes import RequestCode
from rocketq.protocol.headers import SendMessageRequestHeaderV2

from .standalone import (
    FAST_DELAY_LEVELS,
    NodeRun,
    Standalone,
    ensure_node_modules,
    mqadmin,
    mqadmin_ok,
    node_available,
    run_node,
    start_standalone,
    unique,
)

_skip = node_available()
pytestmark = [pytest.mark.skipif(_skip is not None, reason=f"ali-ons interop needs node/npm: {_skip}")]

BIG = 8 * 1024  # > compressMsgBodyOverHowmuch (4096): ali-ons zlib-compresses it


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    ensure_node_modules()
    sa = start_standalone(tmp_path_factory.mktemp("ali-ons"), {"messageDelayLevel": FAST_DELAY_LEVELS})
    yield sa
    sa.stop()


@pytest.fixture(scope="module")
def admin(standalone: Standalone) -> Iterator[MQAdminExt]:
    with MQAdminExt(standalone.namesrv) as a:
        yield a


def create_topic(sa: Standalone, topic: str, queues: int = 4) -> None:
    mqadmin_ok(
        sa.namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", str(queues), "-w", str(queues)
    )


def pull_all(admin: MQAdminExt, topic: str, expect: int, timeout: float = 10.0) -> list[StoredMessage]:
    """Raw pulls (no client library) over every queue until `expect` messages are seen."""
    deadline = time.monotonic() + timeout
    while True:
        got: list[StoredMessage] = []
        for name, addr, qid in admin.topic_queues(topic):
            offset = 0
            while True:
                r = admin.pull(addr, topic, qid, offset, broker_name=name)
                got.extend(r.messages)
                if not r.messages or r.next_begin_offset <= offset:
                    break
                offset = r.next_begin_offset
        if len(got) >= expect or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def raw_send(admin: MQAdminExt, topic: str, body: bytes, tags: str, *, compress: bool = False) -> None:
    """A send as a Java client does it (SEND_MESSAGE_V2, UNIQ_KEY, zlib + sysFlag 1 when compressed)."""
    _, addr, qid = admin.topic_queues(topic, writable=True)[0]
    sys_flag = 0
    if compress:
        body = zlib.compress(body, 5)
        sys_flag = 1
    props = {"TAGS": tags, "WAIT": "true", "UNIQ_KEY": new_uniq_key()}
    ext = SendMessageRequestHeaderV2(
        a="PY_RAW_PG",
        b=topic,
        c="TBW102",
        d=4,
        e=qid,
        f=sys_flag,
        g=int(time.time() * 1000),
        h=0,
        i=encode_properties(props),
        j=0,
        k=False,
        m=False,
    ).to_ext()
    resp = admin.invoke_broker(addr, RequestCode.SEND_MESSAGE_V2, ext, body)
    assert resp.code == 0, f"raw send failed: {resp.code} {resp.remark}"


def sha1(b: bytes) -> str:
    return hashlib.sha1(b).hexdigest()


def big_body(text: str) -> bytes:
    unit = (text + "|").encode()
    return (unit * (BIG // len(unit) + 1))[:BIG]


def test_ali_ons_producer_stored_and_pulled_raw(standalone: Standalone, admin: MQAdminExt) -> None:
    topic = unique("AliProd")
    create_topic(standalone, topic)
    msgs = [
        {"topic": topic, "tags": "TagA" if i % 2 == 0 else "TagB", "keys": [f"k-{i}"], "body": f"hello-{i}"}
        for i in range(8)
    ]
    msgs.append({"topic": topic, "tags": "TagC", "keys": ["big"], "body": "BIG", "size": BIG})
    run = run_node("producer.js", {"nameSrv": standalone.namesrv, "group": unique("PG"), "messages": msgs})
    sent = run.of("sent")
    assert len(sent) == 9
    assert {s["status"] for s in sent} == {"SEND_OK"}
    assert {s["queueId"] for s in sent} <= {0, 1, 2, 3}

    stored = pull_all(admin, topic, 9)
    assert len(stored) == 9
    by_sha = {sha1(m.body): m for m in stored}
    for s, m in zip(sent, msgs, strict=True):
        got = by_sha[s["bodySha1"]]  # bodies arrive intact (the big one decompressed)
        assert got.tags == m["tags"]
        assert got.keys == m["keys"][0]
        assert got.queue_id == s["queueId"]
        assert got.queue_offset == s["queueOffset"]
        assert got.offset_msg_id == s["msgId"]  # ali-ons reports the broker's offsetMsgId
    big = by_sha[sent[-1]["bodySha1"]]
    assert big.sys_flag & 1, "the broker must keep ali-ons' COMPRESSED sysFlag"
    assert len(big.body) == BIG

    # the offsetMsgId ali-ons got back resolves with mqadmin queryMsgById
    text = mqadmin_ok(standalone.namesrv, "queryMsgById", "-i", sent[0]["msgId"])
    assert topic in text and "hello-0" in text


def test_ali_ons_consumer_gets_java_style_sends_with_tag_filter(
    standalone: Standalone, admin: MQAdminExt
) -> None:
    topic = unique("AliCons")
    create_topic(standalone, topic, queues=2)
    for i in range(6):
        raw_send(admin, topic, f"py-{i}".encode(), "TagA" if i % 2 == 0 else "TagB")
    big = big_body("PYBIG")
    raw_send(admin, topic, big, "TagA", compress=True)

    run = run_node(
        "consumer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": unique("CG"),
            "topic": topic,
            "subExpression": "TagA",
            "expect": 4,
            "timeoutMs": 40000,
        },
        timeout=60,
    )
    got = run.of("msg")
    assert all(m["tags"] == "TagA" for m in got), run.report()
    bodies = sorted(m["bodyHead"] for m in got if m["bodyLen"] < 100)
    assert bodies == ["py-0", "py-2", "py-4"]
    big_seen = [m for m in got if m["bodyLen"] >= 100]
    assert len(big_seen) == 1 and big_seen[0]["bodySha1"] == sha1(big), (
        "compressed body must inflate in ali-ons"
    )
    assert run.of("done")[0]["reason"] == "done"


def test_ali_ons_round_trip_and_committed_offsets(standalone: Standalone) -> None:
    topic = unique("AliRt")
    group = unique("CGRT")
    create_topic(standalone, topic)
    consumer = NodeRun(
        "consumer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": group,
            "topic": topic,
            "subExpression": "TagA || TagB",
            "expect": 10,
            "timeoutMs": 40000,
        },
    )
    try:
        consumer.wait_for("ready", timeout=30)
        # ali-ons' HEART_BEAT (subscriptions as JSON) is understood: mqadmin consumerConnection shows it
        deadline = time.monotonic() + 15
        while True:
            code, conn = mqadmin(standalone.namesrv, "consumerConnection", "-g", group)
            if (code == 0 and topic in conn) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert code == 0 and "TagA || TagB" in conn and "CLUSTERING" in conn, conn
        msgs = [
            {"topic": topic, "tags": ["TagA", "TagB", "TagX"][i % 3], "body": f"rt-{i}"} for i in range(15)
        ]
        run_node("producer.js", {"nameSrv": standalone.namesrv, "group": unique("PG"), "messages": msgs})
        assert consumer.wait(60) == 0, consumer.report()
    finally:
        consumer.kill()
    got = consumer.of("msg")
    assert sorted(m["bodyHead"] for m in got) == sorted(f"rt-{i}" for i in range(15) if i % 3 != 2)
    # ali-ons persisted its offsets on the broker: consumerProgress shows no lag for the TagA/TagB part
    text = mqadmin_ok(standalone.namesrv, "consumerProgress", "-g", group)
    assert topic in text
    assert "Diff Total:" in text
    # ali-ons' UNREGISTER_CLIENT on close took it out of the group (the script exited normally)
    code, _ = mqadmin(standalone.namesrv, "consumerConnection", "-g", group)
    assert code == 1


def test_ali_ons_retry_path(standalone: Standalone) -> None:
    topic = unique("AliRetry")
    group = unique("CGRETRY")
    create_topic(standalone, topic, queues=1)
    run_node(
        "producer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": unique("PG"),
            "messages": [
                {"topic": topic, "tags": "TagR", "body": "RETRY-me"},
                {"topic": topic, "tags": "TagR", "body": "plain"},
                {"topic": topic, "tags": "TagR", "body": "RETRYBIG", "size": BIG},  # zlib-compressed
            ],
        },
    )
    run = run_node(
        "consumer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": group,
            "topic": topic,
            "expect": 3,
            "timeoutMs": 60000,
            "failUntil": {"RETRY": 2},
        },
        timeout=80,
    )
    retried = [m for m in run.of("msg") if m["bodyHead"] == "RETRY-me"]
    # handler throws twice -> CONSUMER_SEND_MSG_BACK -> %RETRY%<group> -> redelivered with reconsumeTimes 1, 2
    assert [m["reconsumeTimes"] for m in retried] == [0, 1, 2], run.report()
    assert [m["failed"] for m in retried] == [True, True, False]
    assert all(m["topic"] == topic for m in retried)
    assert retried[1]["properties"].get("ORIGIN_MESSAGE_ID")
    assert [m["bodyHead"] for m in run.of("msg")].count("plain") == 1
    # a compressed body keeps its COMPRESSED sysFlag through send-back and the retry topic
    big = [m for m in run.of("msg") if m["bodyLen"] >= 100]
    assert [m["reconsumeTimes"] for m in big] == [0, 1, 2], run.report()
    assert len({m["bodySha1"] for m in big}) == 1 and big[0]["bodyLen"] == BIG


def test_node_scripts_fail_loudly_without_topic(standalone: Standalone) -> None:
    """Sending to a topic that was never created is an error in ali-ons (no auto-create), not a hang."""
    run = NodeRun(
        "producer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": unique("PG"),
            "messages": [{"topic": unique("NoSuchTopic"), "body": "x"}],
        },
    )
    assert run.wait(60) != 0
    assert run.of("fatal")


# -- legs with the rocketq Python client ------------------------------------------------------------------
def _collect_python(group: str, namesrv: str, topic: str, expr: str, expect: int, timeout: float = 30.0):
    """Start a rocketq PushConsumer, wait for `expect` messages, return them (and the consumer, shut down)."""
    import threading

    from rocketq import ConsumeFromWhere, ConsumeResult, PushConsumer

    got: list = []
    lock = threading.Lock()
    done = threading.Event()

    def listener(msgs: list) -> ConsumeResult:
        with lock:
            got.extend(msgs)
            if len(got) >= expect:
                done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        group, namesrv=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic, expr)
    consumer.register_listener(listener)
    consumer.start()
    try:
        done.wait(timeout)
        time.sleep(0.5)  # anything filtered wrongly would show up now
    finally:
        consumer.shutdown()
    with lock:
        return list(got)


def test_ali_ons_producer_to_python_push_consumer(standalone: Standalone) -> None:
    topic = unique("AliToPy")
    create_topic(standalone, topic)
    msgs = [
        {
            "topic": topic,
            "tags": ["TagA", "TagB", "TagC"][i % 3],
            "keys": [f"order-{i}", "x"],
            "body": f"ali-{i}",
        }
        for i in range(9)
    ]
    msgs.append(
        {"topic": topic, "tags": "TagC", "body": "ALIBIG", "size": BIG, "properties": {"color": "red"}}
    )
    sent = run_node(
        "producer.js", {"nameSrv": standalone.namesrv, "group": unique("PG"), "messages": msgs}
    ).of("sent")
    assert len(sent) == 10

    got = _collect_python(unique("PYCG"), standalone.namesrv, topic, "TagA || TagC", expect=7)
    assert sorted(m.tags for m in got) == ["TagA"] * 3 + ["TagC"] * 4
    small = {m.body.decode(): m for m in got if len(m.body) < 100}
    assert sorted(small) == ["ali-0", "ali-2", "ali-3", "ali-5", "ali-6", "ali-8"]
    assert small["ali-3"].keys == ["order-3", "x"]
    assert small["ali-3"].msg_id == sent[3]["msgId"]  # no UNIQ_KEY from ali-ons: msgId is the offsetMsgId
    (big,) = [m for m in got if len(m.body) >= 100]
    assert sha1(big.body) == sent[-1]["bodySha1"]  # decompressed by the Python client
    assert big.properties.get("color") == "red"


def test_python_producer_to_ali_ons_consumer(standalone: Standalone) -> None:
    from rocketq import Message, Producer, SendStatus

    topic = unique("PyToAli")
    create_topic(standalone, topic)
    big = big_body("PYCLIENTBIG")
    with Producer(unique("PYPG"), namesrv=standalone.namesrv) as producer:
        results = [
            producer.send(
                Message(topic, f"pyc-{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB", keys=[f"k{i}"])
            )
            for i in range(6)
        ]
        results.append(producer.send(Message(topic, big, tags="TagA", properties={"shape": "round"})))
    assert {r.status for r in results} == {SendStatus.SEND_OK}

    run = run_node(
        "consumer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": unique("CG"),
            "topic": topic,
            "subExpression": "TagA",
            "expect": 4,
            "timeoutMs": 40000,
        },
        timeout=60,
    )
    got = run.of("msg")
    assert all(m["tags"] == "TagA" for m in got), run.report()
    assert sorted(m["bodyHead"] for m in got if m["bodyLen"] < 100) == ["pyc-0", "pyc-2", "pyc-4"]
    assert {m["keys"] for m in got if m["bodyLen"] < 100} == {"k0", "k2", "k4"}
    (big_msg,) = [m for m in got if m["bodyLen"] >= 100]
    assert big_msg["bodySha1"] == sha1(big), "the Python client's zlib body must inflate in ali-ons"
    assert big_msg["properties"].get("shape") == "round"
    # ali-ons reports the offsetMsgId; the Python client returned the same one
    assert {m["msgId"] for m in got} <= {r.offset_msg_id for r in results}


def test_ali_ons_consumer_resumes_from_committed_offset(standalone: Standalone) -> None:
    """ali-ons persists offsets with UPDATE_CONSUMER_OFFSET (flag 0, -1 for 0); a restart resumes there."""
    topic = unique("AliResume")
    group = unique("CGRES")
    create_topic(standalone, topic, queues=2)
    pg = unique("PG")
    first = [{"topic": topic, "tags": "T", "body": f"first-{i}"} for i in range(6)]
    run_node("producer.js", {"nameSrv": standalone.namesrv, "group": pg, "messages": first})
    cfg = {
        "nameSrv": standalone.namesrv,
        "group": group,
        "topic": topic,
        "timeoutMs": 40000,
        "lingerMs": 2500,
    }
    run1 = run_node("consumer.js", {**cfg, "expect": 6}, timeout=60)
    assert sorted(m["bodyHead"] for m in run1.of("msg")) == sorted(f"first-{i}" for i in range(6))

    prog = mqadmin_ok(standalone.namesrv, "consumerProgress", "-g", group)
    assert "Diff Total: 0" in prog, prog

    second = [{"topic": topic, "tags": "T", "body": f"second-{i}"} for i in range(3)]
    run_node("producer.js", {"nameSrv": standalone.namesrv, "group": pg, "messages": second})
    run2 = run_node("consumer.js", {**cfg, "expect": 3}, timeout=60)
    assert sorted(m["bodyHead"] for m in run2.of("msg")) == ["second-0", "second-1", "second-2"], (
        run2.report()
    )


def test_ali_ons_new_group_last_offset_sees_young_queue_history(standalone: Standalone) -> None:
    """CONSUME_FROM_LAST_OFFSET (ali-ons' default) for a new group: as in RocketMQ 4.9.8, the broker answers
    QUERY_CONSUMER_OFFSET with 0 while the queue's first message is still there (apache/rocketmq#334), so
    ali-ons starts at 0 and also sees the history; it does not fall back to GET_MAX_OFFSET."""
    topic = unique("AliLast")
    create_topic(standalone, topic, queues=1)
    pg = unique("PG")
    old = [{"topic": topic, "tags": "T", "body": f"old-{i}"} for i in range(3)]
    run_node("producer.js", {"nameSrv": standalone.namesrv, "group": pg, "messages": old})
    consumer = NodeRun(
        "consumer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": unique("CGLAST"),
            "topic": topic,
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "expect": 5,
            "timeoutMs": 40000,
        },
    )
    try:
        consumer.wait_for("ready", timeout=30)
        new = [{"topic": topic, "tags": "T", "body": f"new-{i}"} for i in range(2)]
        run_node("producer.js", {"nameSrv": standalone.namesrv, "group": pg, "messages": new})
        assert consumer.wait(60) == 0, consumer.report()
    finally:
        consumer.kill()
    got = sorted(m["bodyHead"] for m in consumer.of("msg"))
    assert got == ["new-0", "new-1", "old-0", "old-1", "old-2"], consumer.report()


def test_ali_ons_delay_level(standalone: Standalone) -> None:
    """ali-ons' delayTimeLevel (DELAY property) goes through SCHEDULE_TOPIC_XXXX (levels are 1 s here)."""
    topic = unique("AliDelay")
    create_topic(standalone, topic, queues=1)
    consumer = NodeRun(
        "consumer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": unique("CGD"),
            "topic": topic,
            "expect": 1,
            "timeoutMs": 40000,
        },
    )
    try:
        consumer.wait_for("ready", timeout=30)
        time.sleep(1.5)  # assigned and pulling
        sent_at = time.time()
        msg = {"topic": topic, "tags": "T", "body": "delayed", "delayLevel": 3}
        run_node("producer.js", {"nameSrv": standalone.namesrv, "group": unique("PG"), "messages": [msg]})
        (got,) = consumer.wait_for("msg", 1, timeout=30)
        arrived = time.time()
    finally:
        consumer.kill()
    assert got["bodyHead"] == "delayed"
    # as in RocketMQ: DELAY is cleared on delivery, REAL_TOPIC/REAL_QID remain
    assert "DELAY" not in got["properties"]
    assert got["properties"].get("REAL_TOPIC") == topic
    assert arrived - sent_at >= 0.9, "delivered before its delay"


def test_ali_ons_dead_letter_after_max_reconsume_times(standalone: Standalone, admin: MQAdminExt) -> None:
    """maxReconsumeTimes from ali-ons' send-back header: after it, the message lands in %DLQ%<group>."""
    topic = unique("AliDlq")
    group = unique("CGDLQ")
    create_topic(standalone, topic, queues=1)
    key = unique("dlqkey")
    run_node(
        "producer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": unique("PG"),
            "messages": [{"topic": topic, "tags": "T", "keys": [key], "body": "DLQ-me"}],
        },
    )
    consumer = NodeRun(
        "consumer.js",
        {
            "nameSrv": standalone.namesrv,
            "group": group,
            "topic": topic,
            "timeoutMs": 40000,
            "failUntil": {"DLQ": 100},
            "maxReconsumeTimes": 1,
        },
    )
    dlq = f"%DLQ%{group}"
    try:
        consumer.wait_for("msg", 2, timeout=40)  # reconsumeTimes 0 and 1, both failing
        deadline = time.monotonic() + 20
        found = []
        while not found and time.monotonic() < deadline:
            try:
                found = admin.query_message(dlq, key)
            except Exception:
                found = []
            time.sleep(0.3)
    finally:
        consumer.kill()
    assert [m["reconsumeTimes"] for m in consumer.of("msg")][:2] == [0, 1], consumer.report()
    assert found, f"no message with key {key} in {dlq}"
    assert found[0].body == b"DLQ-me"
    assert found[0].properties.get("RETRY_TOPIC") == topic or found[0].properties.get("ORIGIN_MESSAGE_ID")


def test_ali_ons_broadcasting(standalone: Standalone) -> None:
    """isBroadcast: every ali-ons consumer of the group gets every message (local offsets)."""
    topic = unique("AliBc")
    group = unique("CGBC")
    create_topic(standalone, topic, queues=2)
    cfg = {
        "nameSrv": standalone.namesrv,
        "group": group,
        "topic": topic,
        "expect": 4,
        "timeoutMs": 40000,
        "isBroadcast": True,
    }
    a = NodeRun("consumer.js", {**cfg, "instanceName": "bc-a"})
    b = NodeRun("consumer.js", {**cfg, "instanceName": "bc-b"})
    try:
        a.wait_for("ready", timeout=30)
        b.wait_for("ready", timeout=30)
        time.sleep(1.5)
        msgs = [{"topic": topic, "tags": "T", "body": f"bc-{i}"} for i in range(4)]
        run_node("producer.js", {"nameSrv": standalone.namesrv, "group": unique("PG"), "messages": msgs})
        assert a.wait(60) == 0, a.report()
        assert b.wait(60) == 0, b.report()
    finally:
        a.kill()
        b.kill()
    for run in (a, b):
        assert sorted(m["bodyHead"] for m in run.of("msg")) == [f"bc-{i}" for i in range(4)], run.report()


def test_mixed_group_ali_ons_and_python_share_the_queues(standalone: Standalone) -> None:
    """One ali-ons and one rocketq consumer in the same clustering group: both allocate averagely over the
    same sorted queue and client-id lists, so they split the queues with no gap and no overlap."""
    import threading

    from rocketq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

    topic = unique("AliMixed")
    group = unique("CGMIX")
    create_topic(standalone, topic, queues=4)
    py_got: list[tuple[int, str]] = []
    lock = threading.Lock()

    def listener(msgs: list) -> ConsumeResult:
        with lock:
            py_got.extend((m.queue_id, m.body.decode()) for m in msgs)
        return ConsumeResult.SUCCESS

    py = PushConsumer(
        group, namesrv=standalone.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    py.subscribe(topic, "*")
    py.register_listener(listener)
    py.start()
    node = NodeRun(
        "consumer.js",
        {"nameSrv": standalone.namesrv, "group": group, "topic": topic, "expect": 1000, "timeoutMs": 60000},
    )
    try:
        node.wait_for("ready", timeout=30)
        deadline = time.monotonic() + 30  # until both hold queues: the Python side drops two after NOTIFY

        def mine() -> list:
            return [q for q in py.assigned_queues() if q.topic == topic]

        while time.monotonic() < deadline and len(mine()) != 2:
            time.sleep(0.2)
        assert len(mine()) == 2, py.assigned_queues()
        time.sleep(2)  # ali-ons rebalances every second
        with Producer(unique("PG"), namesrv=standalone.namesrv) as p:
            for i in range(20):
                p.send(Message(topic, f"mix-{i}".encode(), tags="T"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                total = len(py_got) + len(node.of("msg"))
            if total >= 20:
                break
            time.sleep(0.2)
        time.sleep(1)  # duplicates, if any, would arrive now
    finally:
        node.kill()
        py.shutdown()
    node_got = [(m["queueId"], m["bodyHead"]) for m in node.of("msg")]
    py_bodies = sorted(b for _, b in py_got)
    node_bodies = sorted(b for _, b in node_got)
    assert sorted(py_bodies + node_bodies) == sorted(f"mix-{i}" for i in range(20)), node.report()
    assert py_bodies and node_bodies, "both consumers must get a share"
    assert not {q for q, _ in py_got} & {q for q, _ in node_got}, "a queue was consumed by both"
