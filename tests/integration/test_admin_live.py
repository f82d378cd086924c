"""mqadmin with live consumers (the rocketq Python client) against a real `rocketq standalone`."""

from __future__ import annotations

import threading
import time

from tests.interop.standalone import Standalone, mqadmin, mqadmin_ok, rows, standalone_fixture, unique

from rocketq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

CLUSTER = "DefaultCluster"


sa = standalone_fixture("admin-live")


class Collector:
    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, msgs: list) -> ConsumeResult:
        with self.cond:
            self.bodies.extend(m.body.decode() for m in msgs)
            self.cond.notify_all()
        return ConsumeResult.SUCCESS

    def wait(self, n: int, timeout: float = 20.0) -> list[str]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.bodies) < n and time.monotonic() < deadline:
                self.cond.wait(0.2)
            return list(self.bodies)


def produce(sa: Standalone, topic: str, n: int, prefix: str) -> None:
    with Producer(unique("PG"), namesrv=sa.namesrv) as p:
        for i in range(n):
            p.send(Message(topic, f"{prefix}-{i}".encode(), tags="TagA"))


def start_consumer(sa: Standalone, group: str, topic: str, collector: Collector) -> PushConsumer:
    c = PushConsumer(group, namesrv=sa.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "TagA || TagB")
    c.register_listener(collector)
    c.start()
    return c


def test_connection_and_progress_of_a_live_group(sa: Standalone) -> None:
    topic, group = unique("LiveT"), unique("LiveG")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2")
    produce(sa, topic, 6, "a")
    col = Collector()
    consumer = start_consumer(sa, group, topic, col)
    try:
        assert len(col.wait(6)) == 6
        conn = mqadmin_ok(sa.namesrv, "consumerConnection", "-g", group)
        clients = rows(conn)
        assert len(clients) == 1 and clients[0]["ClientId"]
        sub_part = conn.split("Below is subscription:")[1]
        subs = rows(sub_part)
        assert {s["Topic"]: s["SubExpression"] for s in subs}[topic] == "TagA || TagB"
        assert "MessageModel: CLUSTERING" in conn
        assert "ConsumeType: CONSUME_PASSIVELY" in conn
        all_groups = rows(mqadmin_ok(sa.namesrv, "consumerProgress"))
        assert group in {g["Group"] for g in all_groups}
        # -s true: which client holds each queue (GET_CONSUMER_RUNNING_INFO relayed to the consumer)
        with_ip = [
            r
            for r in rows(mqadmin_ok(sa.namesrv, "consumerProgress", "-g", group, "-s", "true"))
            if r["Topic"] == topic
        ]
        assert len(with_ip) == 2 and all(r["Client IP"] not in ("", "N/A") for r in with_ip)
        # queryMsgById -g -d: the broker relays CONSUME_MESSAGE_DIRECTLY to that consumer
        with Producer(unique("PG"), namesrv=sa.namesrv) as p:
            sent = p.send(Message(topic, b"direct", tags="TagA"))
        direct = mqadmin_ok(
            sa.namesrv, "queryMsgById", "-i", sent.offset_msg_id, "-g", group, "-d", clients[0]["ClientId"]
        )
        assert "CR_SUCCESS" in direct
        deadline = time.monotonic() + 10  # consumed twice: directly and from its queue
        while col.wait(0, 0.1).count("direct") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        consumer.shutdown()  # persists offsets
    prog = mqadmin_ok(sa.namesrv, "consumerProgress", "-g", group)
    mine = [r for r in rows(prog) if r["Topic"] == topic]
    assert sum(int(r["Broker Offset"]) for r in mine) == 7
    assert all(r["Consumer Offset"] == r["Broker Offset"] for r in mine), prog
    assert "Diff Total: 0" in prog
    deadline = time.monotonic() + 10  # the broker notices the unregister
    while mqadmin(sa.namesrv, "consumerConnection", "-g", group)[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert mqadmin(sa.namesrv, "consumerConnection", "-g", group)[0] == 1


def test_reset_offset_offline_group_then_reconsume(sa: Standalone) -> None:
    topic, group = unique("ResetT"), unique("ResetG")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    produce(sa, topic, 4, "r")
    col = Collector()
    c = start_consumer(sa, group, topic, col)
    assert len(col.wait(4)) == 4
    c.shutdown()
    mqadmin_ok(sa.namesrv, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    col2 = Collector()
    c2 = start_consumer(sa, group, topic, col2)
    try:
        assert sorted(col2.wait(4)) == ["r-0", "r-1", "r-2", "r-3"]
    finally:
        c2.shutdown()


def test_reset_offset_with_consumer_online(sa: Standalone) -> None:
    topic, group = unique("ResetLiveT"), unique("ResetLiveG")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    produce(sa, topic, 3, "l")
    col = Collector()
    c = start_consumer(sa, group, topic, col)
    try:
        assert len(col.wait(3)) == 3
        mqadmin_ok(sa.namesrv, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
        assert len(col.wait(6, timeout=10)) == 6  # a Java consumer re-consumes from the reset offsets
    finally:
        c.shutdown()
