"""Python client end to end against a real `rocketq standalone` (NameServer + Broker) on 127.0.0.1.

One standalone per module; every test uses its own topics and groups. Delay levels are shortened in
broker.conf so retries and delays take a second or two (level 1 = 1s, level 2 = 2s, others 1s).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.helpers.procs import RocketqProcess
from tests.interop.standalone import mqadmin_ok, start_standalone

from rocketq import (
    ConsumeConcurrentlyContext,
    ConsumeFromWhere,
    ConsumeOrderlyResult,
    ConsumeResult,
    LitePullConsumer,
    LocalTransactionState,
    Message,
    MessageModel,
    MessageQueue,
    MessageSelector,
    MQBrokerError,
    MQClientError,
    Producer,
    PushConsumer,
    SendStatus,
    TransactionProducer,
    create_reply_message,
)
from rocketq.client.instance import ClientConfig

DELAY_LEVELS = "1s 2s " + " ".join(["1s"] * 16)
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
# quick rebalance so membership changes settle within the test timeouts
FAST = ClientConfig(rebalance_interval=2.0, persist_consumer_offset_interval=1.0)


class Cluster:
    def __init__(self, proc: RocketqProcess, broker: str, home: Path) -> None:
        self.proc = proc
        self.namesrv = proc.addr
        self.broker = broker
        self.home = home

    def admin(self, *args: str) -> str:
        return mqadmin_ok(self.namesrv, *args)

    def topic(self, queues: int = 4, prefix: str = "T") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.admin("updateTopic", "-c", "DefaultCluster", "-t", name, "-r", str(queues), "-w", str(queues))
        return name


def start_cluster(home: Path, extra: dict[str, str] | None = None) -> Cluster:
    conf = {
        "messageDelayLevel": DELAY_LEVELS,
        "flushDiskType": "ASYNC_FLUSH",
        "enablePropertyFilter": "true",
        # quick transaction check-back
        "transactionTimeOut": "1000",
        "transactionCheckInterval": "1000",
        **(extra or {}),
    }
    s = start_standalone(home, conf)
    return Cluster(s.proc, s.broker, home)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("standalone"))
    yield c
    c.proc.stop()


def group() -> str:
    return f"G_{uuid.uuid4().hex[:10]}"


def wait_until(cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Collector:
    """A listener recording every delivery; ``fail`` decides RECONSUME_LATER per message."""

    def __init__(self, fail: Callable[[object], bool] | None = None) -> None:
        self.lock = threading.Lock()
        self.msgs: list = []
        self.fail = fail

    def __call__(self, msgs: list) -> ConsumeResult:
        with self.lock:
            self.msgs.extend(msgs)
        if self.fail is not None and any(self.fail(m) for m in msgs):
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.msgs]

    def __len__(self) -> int:
        with self.lock:
            return len(self.msgs)


def consumer(ns: str, grp: str, topic: str, listener: Callable, expr: str = "*", **kw) -> PushConsumer:
    kw.setdefault("consume_from_where", FIRST)
    kw.setdefault("client_config", FAST)
    c = PushConsumer(grp, namesrv=ns, **kw)
    c.subscribe(topic, expr)
    c.register_listener(listener)
    c.start()
    return c


# -- seed examples ------------------------------------------------------------------------------------
def test_seed_sync_async_oneway_then_consume(cluster: Cluster) -> None:
    topic = cluster.topic()
    sent = {}
    with Producer("PG_seed", namesrv=cluster.namesrv) as producer:
        for i in range(10):
            msg = Message(
                topic, f"sync {i}".encode(), tags="TagA", keys=[f"ORDER-{i}"], properties={"a": str(i)}
            )
            r = producer.send(msg)
            assert r.status is SendStatus.SEND_OK
            assert r.queue.topic == topic and r.queue.broker_name and 0 <= r.queue.queue_id < 4
            assert len(r.msg_id) == 32 and len(r.offset_msg_id) == 32 and r.queue_offset >= 0
            sent[r.msg_id] = r
        futures = [producer.send_async(Message(topic, f"async {i}".encode(), tags="TagA")) for i in range(10)]
        callbacks: list = []
        futures.append(
            producer.send_async(
                Message(topic, b"async cb", tags="TagA"), callback=lambda r, e: callbacks.append((r, e))
            )
        )
        for f in futures:
            r = f.result(10)
            assert r.status is SendStatus.SEND_OK
            sent[r.msg_id] = r

        class SendCallback:  # Java-style callback object
            def on_success(self, result: object) -> None:
                callbacks.append((result, None))

            def on_exception(self, exc: BaseException) -> None:
                callbacks.append((None, exc))

        futures.append(
            producer.send_async(Message(topic, b"async obj", tags="TagA"), callback=SendCallback())
        )
        wait_until(lambda: len(callbacks) == 2, 5, "async callbacks")
        assert all(e is None and r.status is SendStatus.SEND_OK for r, e in callbacks)
        for i in range(10):
            producer.send_oneway(Message(topic, f"oneway {i}".encode(), tags="TagA"))

    got = Collector()
    c = consumer(cluster.namesrv, group(), topic, got)
    try:
        wait_until(lambda: len(got) >= 32, 30, "32 messages")
        time.sleep(0.5)
    finally:
        c.shutdown()
    bodies = Counter(got.bodies())
    expected = {f"{k} {i}".encode() for k in ("sync", "async", "oneway") for i in range(10)}
    expected |= {b"async cb", b"async obj"}
    assert set(bodies) == expected
    by_id = {m.msg_id: m for m in got.msgs}
    for msg_id, r in sent.items():
        m = by_id[msg_id]
        assert m.offset_msg_id == r.offset_msg_id
        assert (m.topic, m.queue_id, m.queue_offset) == (topic, r.queue.queue_id, r.queue_offset)
        assert m.broker_name == r.queue.broker_name
        assert m.tags == "TagA" and m.reconsume_times == 0
        assert m.born_timestamp > 0 and m.store_timestamp >= m.born_timestamp - 1000
        assert m.commit_log_offset >= 0
        if m.body.startswith(b"sync"):
            i = int(m.body.split()[1])
            assert m.keys == [f"ORDER-{i}"] and m.properties["a"] == str(i)


def test_ordered_by_order_id_with_selector(cluster: Cluster) -> None:
    topic = cluster.topic(queues=4)
    orders, steps = 8, 12
    with Producer("PG_order", namesrv=cluster.namesrv) as producer:
        for step in range(steps):
            for order_id in range(orders):
                r = producer.send(
                    Message(topic, f"{order_id}:{step}".encode(), tags="TagA", keys=[f"ORDER-{order_id}"]),
                    selector=lambda queues, msg, arg: queues[arg % len(queues)],
                    arg=order_id,
                )
                assert r.queue.queue_id == order_id % 4

    seen: dict[int, list[int]] = defaultdict(list)
    lock = threading.Lock()

    def listener(msgs: list) -> ConsumeResult:
        with lock:
            for m in msgs:
                order_id, step = map(int, m.body.decode().split(":"))
                seen[order_id].append(step)
        return ConsumeResult.SUCCESS

    c = PushConsumer(group(), namesrv=cluster.namesrv, consume_from_where=FIRST, client_config=FAST)
    c.subscribe(topic, "*")
    c.register_listener(listener, orderly=True)
    c.start()
    try:
        wait_until(lambda: sum(len(v) for v in seen.values()) >= orders * steps, 30, "all ordered messages")
    finally:
        c.shutdown()
    for order_id in range(orders):
        assert seen[order_id] == list(range(steps)), f"order {order_id} out of order: {seen[order_id]}"


def test_tag_filter(cluster: Cluster) -> None:
    topic = cluster.topic()
    with Producer("PG_tags", namesrv=cluster.namesrv) as p:
        for tag in ("TagA", "TagB", "TagC", None):
            for i in range(5):
                p.send(Message(topic, f"{tag}-{i}".encode(), tags=tag))
    got = Collector()
    c = consumer(cluster.namesrv, group(), topic, got, "TagA || TagB")
    try:
        wait_until(lambda: len(got) >= 10, 20, "tagged messages")
        time.sleep(1.0)
    finally:
        c.shutdown()
    assert sorted(got.bodies()) == sorted(f"{t}-{i}".encode() for t in ("TagA", "TagB") for i in range(5))


# -- load balancing -----------------------------------------------------------------------------------
def test_clustering_three_consumers_share_queues(cluster: Cluster) -> None:
    topic = cluster.topic(queues=8)
    grp = group()
    collectors = [Collector() for _ in range(3)]
    consumers = [consumer(cluster.namesrv, grp, topic, col) for col in collectors]
    try:
        # wait for a stable split: every consumer owns queues and together they own all 8, disjointly
        def split() -> bool:
            owned = [{q for q in c.assigned_queues() if q.topic == topic} for c in consumers]
            return all(owned) and sum(len(o) for o in owned) == 8 and len(set().union(*owned)) == 8

        wait_until(split, 30, "a stable 3-way split")
        assert len({c.client_id for c in consumers}) == 3
        with Producer("PG_cl", namesrv=cluster.namesrv) as p:
            for i in range(240):
                p.send(Message(topic, b"m%d" % i))
        wait_until(
            lambda: len(set().union(*(set(c.bodies()) for c in collectors))) >= 240, 30, "240 messages"
        )
    finally:
        for c in consumers:
            c.shutdown()
    all_bodies = [b for col in collectors for b in col.bodies()]
    assert set(all_bodies) == {b"m%d" % i for i in range(240)}
    assert all(len(col) > 0 for col in collectors), [len(col) for col in collectors]
    assert len(all_bodies) == 240  # a stable split delivers each message once


def test_broadcasting_delivers_everything_to_each(cluster: Cluster, tmp_path: Path) -> None:
    topic = cluster.topic(queues=4)
    grp = group()
    collectors = [Collector() for _ in range(3)]
    consumers = [
        consumer(
            cluster.namesrv,
            grp,
            topic,
            col,
            message_model=MessageModel.BROADCASTING,
            offset_store_dir=str(tmp_path),
        )
        for col in collectors
    ]
    try:
        wait_until(lambda: all(len(c.assigned_queues()) == 4 for c in consumers), 20, "all queues everywhere")
        with Producer("PG_bc", namesrv=cluster.namesrv) as p:
            for i in range(60):
                p.send(Message(topic, b"b%d" % i))
        wait_until(lambda: all(len(col) >= 60 for col in collectors), 30, "60 messages at each consumer")
    finally:
        for c in consumers:
            c.shutdown()
    for col in collectors:
        assert sorted(col.bodies()) == sorted(b"b%d" % i for i in range(60))
    # broadcasting offsets are local files, one per client
    files = list(tmp_path.rglob("offsets.json"))
    assert len(files) == 3


def test_consumer_leaving_triggers_rebalance_nothing_lost(cluster: Cluster) -> None:
    topic = cluster.topic(queues=4)
    grp = group()
    a, b = Collector(), Collector()
    ca = consumer(cluster.namesrv, grp, topic, a)
    cb = consumer(cluster.namesrv, grp, topic, b)
    total = 400
    try:

        def mine(c: PushConsumer) -> set[MessageQueue]:
            return {q for q in c.assigned_queues() if q.topic == topic}

        wait_until(lambda: mine(ca) and mine(cb) and len(mine(ca) | mine(cb)) == 4, 30, "two-way split")
        with Producer("PG_leave", namesrv=cluster.namesrv) as p:
            for i in range(total):
                p.send(Message(topic, b"x%d" % i))
                if i == total // 3:
                    cb.shutdown()  # leaves mid-stream; its queues must move to ca
            wait_until(
                lambda: len({q for q in ca.assigned_queues() if q.topic == topic}) == 4, 30, "takeover"
            )
        wait_until(lambda: len(set(a.bodies()) | set(b.bodies())) >= total, 40, "all messages")
    finally:
        ca.shutdown()
        cb.shutdown()
    seen = Counter(a.bodies() + b.bodies())
    assert set(seen) == {b"x%d" % i for i in range(total)}


# -- retry and dead letters ----------------------------------------------------------------------------
def test_listener_failing_twice_sees_message_three_times(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    deliveries: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def listener(msgs: list) -> ConsumeResult:
        m = msgs[0]
        with lock:
            deliveries.append((m.msg_id, m.reconsume_times, m.topic))
            n = len(deliveries)
        return ConsumeResult.RECONSUME_LATER if n <= 2 else ConsumeResult.SUCCESS

    c = consumer(cluster.namesrv, group(), topic, listener)
    try:
        with Producer("PG_retry", namesrv=cluster.namesrv) as p:
            r = p.send(Message(topic, b"retry me", tags="TagR"))
        wait_until(lambda: len(deliveries) >= 3, 30, "3 deliveries")
        time.sleep(2.5)  # and no fourth
    finally:
        c.shutdown()
    assert [d[1] for d in deliveries] == [0, 1, 2]
    assert all(d[0] == r.msg_id for d in deliveries)  # same id on every delivery
    assert all(d[2] == topic for d in deliveries)  # original topic restored from RETRY_TOPIC


def test_listener_exception_counts_as_reconsume_later(cluster: Cluster) -> None:
    topic = cluster.topic(queues=1)
    calls: list[int] = []

    def listener(msgs: list) -> ConsumeResult:
        calls.append(msgs[0].reconsume_times)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return ConsumeResult.SUCCESS

    c = consumer(cluster.namesrv, group(), topic, listener)
    try:
        with Producer("PG_exc", namesrv=cluster.namesrv) as p:
            p.send(Message(topic, b"e"))
        wait_until(lambda: len(calls) >= 2, 30, "redelivery after exception")
    finally:
        c.shutdown()
    assert calls[:2] == [0, 1]


def test_always_failing_goes_to_dlq(cluster: Cluster) -> None:
    topic = cluster.topic(queues=1)
    grp = group()
    failing = Collector(fail=lambda m: True)
    c = consumer(cluster.namesrv, grp, topic, failing, max_reconsume_times=2)
    try:
        with Producer("PG_dlq", namesrv=cluster.namesrv) as p:
            r = p.send(Message(topic, b"poison", keys=["POISON"]))
        wait_until(lambda: len(failing) >= 3, 30, "3 failed deliveries")
        time.sleep(3.0)  # max_reconsume_times=2 → exactly 1 + 2 deliveries
        assert [m.reconsume_times for m in failing.msgs] == [0, 1, 2]
    finally:
        c.shutdown()
    dlq = Collector()
    d = consumer(cluster.namesrv, group(), f"%DLQ%{grp}", dlq)
    try:
        wait_until(lambda: len(dlq) >= 1, 30, "the message in %DLQ%")
    finally:
        d.shutdown()
    m = dlq.msgs[0]
    assert m.body == b"poison" and m.msg_id == r.msg_id and m.keys == ["POISON"]


# -- delay ---------------------------------------------------------------------------------------------
def test_delay_levels_arrive_after_their_delay(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    arrivals: dict[bytes, float] = {}

    def listener(msgs: list) -> ConsumeResult:
        for m in msgs:
            arrivals[m.body] = time.time()
        return ConsumeResult.SUCCESS

    c = consumer(cluster.namesrv, group(), topic, listener)
    try:
        wait_until(lambda: len(c.assigned_queues()) >= 2, 20, "assignment")
        time.sleep(0.5)
        with Producer("PG_delay", namesrv=cluster.namesrv) as p:
            sent_at = {}
            for level in (0, 1, 2):
                body = b"level-%d" % level
                sent_at[body] = time.time()
                p.send(Message(topic, body, delay_level=level))
        wait_until(lambda: len(arrivals) >= 3, 20, "delayed messages")
    finally:
        c.shutdown()
    expected = {b"level-0": 0.0, b"level-1": 1.0, b"level-2": 2.0}  # broker.conf: "1s 2s ..."
    for body, delay in expected.items():
        waited = arrivals[body] - sent_at[body]
        assert delay - 1.0 <= waited <= delay + 1.0, (body, waited)
    assert arrivals[b"level-2"] - sent_at[b"level-2"] >= 1.0


# -- batch and compression -----------------------------------------------------------------------------
def test_batch_send_and_compression_round_trip(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    big = bytes(range(256)) * 400  # 100 KiB, compressible → zlib on the wire
    with Producer("PG_batch", namesrv=cluster.namesrv) as p:
        r = p.send([Message(topic, b"batch-%d" % i, tags="TagB", keys=[f"K{i}"]) for i in range(50)])
        assert r.status is SendStatus.SEND_OK
        assert len(r.msg_id.split(",")) == 50 and len(r.offset_msg_id.split(",")) == 50
        rb = p.send(Message(topic, big, tags="Big"))
        # a batch over 4 MiB is split into several requests
        huge = [Message(topic, b"h" * (512 * 1024) + b"%d" % i) for i in range(10)]
        rh = p.send(huge)
        assert len(rh.msg_id.split(",")) == 10
    got = Collector()
    c = consumer(cluster.namesrv, group(), topic, got)
    try:
        wait_until(lambda: len(got) >= 61, 30, "batch + big + huge")
    finally:
        c.shutdown()
    by_body = {m.body: m for m in got.msgs}
    batch = [by_body[b"batch-%d" % i] for i in range(50)]
    assert len({m.queue_id for m in batch}) == 1  # one batch → one queue, consecutive offsets
    offs = sorted(m.queue_offset for m in batch)
    assert offs == list(range(offs[0], offs[0] + 50)) and offs[0] == r.queue_offset
    assert [by_body[b"batch-%d" % i].keys for i in range(3)] == [["K0"], ["K1"], ["K2"]]
    mb = by_body[big]
    assert mb.msg_id == rb.msg_id and mb.sys_flag & 0x1 and (mb.sys_flag >> 8) & 0x7 == 3
    assert all(b"h" * (512 * 1024) + b"%d" % i in by_body for i in range(10))


# -- lite pull -----------------------------------------------------------------------------------------
def test_lite_pull_assign_seek_commit(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    with Producer("PG_lite", namesrv=cluster.namesrv) as p:
        for i in range(20):
            p.send(Message(topic, b"L%d" % i), queue=MessageQueue(topic, "broker-a", 0))
    grp = group()
    mq = MessageQueue(topic, "broker-a", 0)
    lp = LitePullConsumer(grp, namesrv=cluster.namesrv, consume_from_where=FIRST, auto_commit=False)
    lp.assign([mq])
    lp.start()
    try:
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            got.extend(lp.poll(timeout_ms=1000))
        assert [m.body for m in got] == [b"L%d" % i for i in range(20)]
        lp.commit()
        assert lp.committed(mq) == 20
        lp.seek(mq, 5)
        again: list = []
        deadline = time.monotonic() + 20
        while len(again) < 15 and time.monotonic() < deadline:
            again.extend(lp.poll(timeout_ms=1000))
        assert [m.queue_offset for m in again] == list(range(5, 20))
        assert lp.poll(timeout_ms=300) == []
        lp.commit({mq: 12})
        assert lp.committed(mq) == 12
        with pytest.raises(MQClientError):
            lp.seek(mq, 1000)
    finally:
        lp.shutdown()
    # a new consumer of the same group resumes from the committed offset
    lp2 = LitePullConsumer(grp, namesrv=cluster.namesrv, consume_from_where=FIRST)
    lp2.assign([mq])
    lp2.start()
    try:
        first: list = []
        deadline = time.monotonic() + 20
        while not first and time.monotonic() < deadline:
            first = lp2.poll(timeout_ms=1000)
        assert first[0].queue_offset == 12
    finally:
        lp2.shutdown()


def test_lite_pull_subscribe(cluster: Cluster) -> None:
    topic = cluster.topic(queues=4)
    with Producer("PG_lite2", namesrv=cluster.namesrv) as p:
        for i in range(40):
            p.send(Message(topic, b"S%d" % i, tags="TagA" if i % 2 else "TagB"))
    lp = LitePullConsumer(group(), namesrv=cluster.namesrv, consume_from_where=FIRST, client_config=FAST)
    lp.subscribe(topic, "TagA")
    lp.start()
    try:
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            got.extend(lp.poll(timeout_ms=500))
        assert sorted(m.body for m in got) == sorted(b"S%d" % i for i in range(1, 40, 2))
        assert len(lp.fetch_message_queues(topic)) == 4
    finally:
        lp.shutdown()


# -- errors --------------------------------------------------------------------------------------------
def test_send_errors_carry_codes(cluster: Cluster) -> None:
    with Producer("PG_err", namesrv=cluster.namesrv, max_message_size=1024 * 1024) as p:
        with pytest.raises(MQClientError) as e:
            p.send(Message(f"NoSuchTopic_{uuid.uuid4().hex[:8]}", b"x"))
        assert e.value.code == 17
        with pytest.raises(MQClientError):
            p.send(Message("bad topic!", b"x"))
        with pytest.raises(MQClientError) as e:
            p.send(Message(cluster.topic(), b"x" * (1024 * 1024 + 1)))
        assert e.value.code == 13
        with pytest.raises(MQClientError):
            p.send(Message(cluster.topic(), b""))
    # the broker's own code and remark surface as MQBrokerError (too large for the broker's limit)
    with Producer("PG_err2", namesrv=cluster.namesrv, max_message_size=64 * 1024 * 1024) as p:
        with pytest.raises(MQBrokerError) as be:
            p.send(Message(cluster.topic(), os.urandom(5 * 1024 * 1024)))  # incompressible, over 4 MiB
        assert be.value.code == 13 and be.value.remark


# -- broker → client requests --------------------------------------------------------------------------
def test_reset_offset_by_time_with_consumer_online(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    grp = group()
    got = Collector()
    c = consumer(cluster.namesrv, grp, topic, got)
    try:
        with Producer("PG_reset", namesrv=cluster.namesrv) as p:
            for i in range(20):
                p.send(Message(topic, b"r%d" % i))
        wait_until(lambda: len(got) >= 20, 20, "first pass")
        time.sleep(1.5)  # offsets persisted to the broker
        # GET_CONSUMER_RUNNING_INFO answered by the client (consumerProgress -s true shows its IP)
        progress = cluster.admin("consumerProgress", "-g", grp, "-s", "true")
        assert topic in progress
        # RESET_CONSUMER_CLIENT_OFFSET: back to the beginning while the consumer runs
        cluster.admin("resetOffsetByTime", "-g", grp, "-t", topic, "-s", "0")
        wait_until(lambda: len(got) >= 40, 30, "second pass after the reset")
    finally:
        c.shutdown()
    assert Counter(got.bodies()) == Counter({b"r%d" % i: 2 for i in range(20)})


def test_flow_control_bounds_cached_messages(cluster: Cluster) -> None:
    topic = cluster.topic(queues=1)
    release = threading.Event()
    got = Collector()

    def slow(msgs: list) -> ConsumeResult:
        release.wait(20)
        return got(msgs)

    with Producer("PG_flow", namesrv=cluster.namesrv) as p:
        for j in range(5):
            p.send([Message(topic, b"f%d-%d" % (j, i)) for i in range(100)])
    c = consumer(cluster.namesrv, group(), topic, slow, pull_threshold_for_queue=50, consume_thread_max=2)
    try:
        core = c._core
        wait_until(lambda: any(pq.msg_count for pq in core._pqs.values()), 20, "first pull")
        time.sleep(1.0)  # a consumer ignoring flow control would have pulled all 500 by now
        cached = max(pq.msg_count for mq, pq in core._pqs.items() if mq.topic == topic)
        assert 0 < cached <= 50 + 32  # threshold + one pull batch
        release.set()
        wait_until(lambda: len(got) >= 500, 30, "everything after release")
    finally:
        release.set()
        c.shutdown()
    assert len(set(got.bodies())) == 500


def test_send_back_fallback_resends_to_retry_topic(cluster: Cluster) -> None:
    """When CONSUMER_SEND_MSG_BACK fails, the message is re-sent to %RETRY%<group> by CLIENT_INNER_PRODUCER
    (with RETRY_TOPIC / RECONSUME_TIME) and comes back with reconsume_times 1 on the original topic."""
    topic = cluster.topic(queues=1)
    grp = group()
    seen: list[tuple[int, str, bytes]] = []
    lock = threading.Lock()

    def listener(msgs: list) -> ConsumeResult:
        with lock:
            seen.extend((m.reconsume_times, m.topic, m.body) for m in msgs)
        return ConsumeResult.SUCCESS

    c = consumer(cluster.namesrv, grp, topic, listener)
    try:
        with Producer("PG_fb", namesrv=cluster.namesrv) as p:
            p.send(Message(topic, b"fallback", tags="TagF"))
        wait_until(lambda: len(seen) >= 1, 20, "first delivery")
        core = c._core
        from rocketq.client.sync import run

        # the same message again, but with a commit-log offset the broker cannot find → send-back fails
        async def resend() -> bool:
            from rocketq.client.message import MessageExt

            m = MessageExt(topic, b"fallback", {"TAGS": "TagF", "UNIQ_KEY": "ABCDEF"})
            m.broker_name = "broker-a"
            m.commit_log_offset = 1 << 50
            m.msg_id = "ABCDEF"
            return await core.send_message_back(m, 0)

        assert run(resend()) is True
        wait_until(lambda: len(seen) >= 2, 30, "redelivery through the retry topic")
    finally:
        c.shutdown()
    assert seen[1] == (1, topic, b"fallback")


def test_orderly_failure_is_retried_in_place_keeping_order(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    seen: list[tuple[int, int]] = []
    failed = threading.Event()

    def listener(msgs: list) -> ConsumeOrderlyResult:
        m = msgs[0]
        step = int(m.body)
        if step == 3 and not failed.is_set():
            failed.set()
            return ConsumeOrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        seen.append((step, m.reconsume_times))
        return ConsumeOrderlyResult.SUCCESS

    c = PushConsumer(
        group(),
        namesrv=cluster.namesrv,
        consume_from_where=FIRST,
        client_config=FAST,
        suspend_current_queue_time_millis=200,
    )
    c.subscribe(topic, "*")
    c.register_listener(listener, orderly=True)
    c.start()
    try:
        with Producer("PG_orderly_fail", namesrv=cluster.namesrv) as p:
            for step in range(8):
                p.send(Message(topic, b"%d" % step), queue=MessageQueue(topic, "broker-a", 1))
        wait_until(lambda: len(seen) >= 8, 20, "8 ordered deliveries")
    finally:
        c.shutdown()
    assert [s for s, _ in seen] == list(range(8))
    assert dict(seen)[3] == 1  # suspended once, then redelivered in place


# -- transactions ---------------------------------------------------------------------------------------
class OrderTransactions:
    """Local transaction outcome by body: commit / rollback / unknown (decided later by the check)."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        kind = msg.body.split(b"-")[0]
        if kind == b"commit":
            return LocalTransactionState.COMMIT_MESSAGE
        if kind == b"rollback":
            return LocalTransactionState.ROLLBACK_MESSAGE
        if kind == b"boom":
            raise RuntimeError("local transaction crashed")
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg) -> LocalTransactionState:
        self.checked.append(msg.msg_id)
        return LocalTransactionState.COMMIT_MESSAGE


def test_transaction_commit_rollback_and_check_back(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    listener = OrderTransactions()
    results = {}
    with TransactionProducer(group(), namesrv=cluster.namesrv, listener=listener) as tp:
        for kind in ("commit", "rollback", "unknown", "boom"):
            r = tp.send_message_in_transaction(Message(topic, f"{kind}-1".encode()), arg=None)
            assert r.status is SendStatus.SEND_OK
            results[kind] = r
        assert results["commit"].local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
        assert results["rollback"].local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
        assert results["boom"].local_transaction_state is LocalTransactionState.UNKNOW
        got = Collector()
        c = consumer(cluster.namesrv, group(), topic, got)
        try:
            # commit is visible at once; unknown and boom only after the broker's check-back says commit
            wait_until(lambda: len(got) >= 3, 30, "committed + checked-back messages")
            time.sleep(1.5)
        finally:
            c.shutdown()
    assert sorted(got.bodies()) == [b"boom-1", b"commit-1", b"unknown-1"]
    assert results["unknown"].msg_id in listener.checked and results["boom"].msg_id in listener.checked
    assert results["commit"].msg_id not in listener.checked


# -- request / reply ------------------------------------------------------------------------------------
def test_request_reply(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    responder = Producer("PG_responder", namesrv=cluster.namesrv)
    responder.start()

    def serve(msgs: list) -> ConsumeResult:
        for m in msgs:
            responder.send(create_reply_message(m, b"re: " + m.body))
        return ConsumeResult.SUCCESS

    c = consumer(cluster.namesrv, group(), topic, serve)
    try:
        with Producer("PG_requester", namesrv=cluster.namesrv) as requester:
            for i in range(3):
                reply = requester.request(Message(topic, b"ping %d" % i), timeout=10000)
                assert reply.body == b"re: ping %d" % i
                assert reply.topic.endswith("_REPLY_TOPIC")
            with pytest.raises(MQClientError):  # no responder for this topic: the wait times out
                requester.request(Message(cluster.topic(), b"nobody"), timeout=1000)
    finally:
        c.shutdown()
        responder.shutdown()


def test_listener_context_ack_index_and_straight_to_dlq(cluster: Cluster) -> None:
    topic = cluster.topic(queues=1)
    grp = group()
    deliveries: list[tuple[bytes, int]] = []
    lock = threading.Lock()

    def listener(msgs: list, context: ConsumeConcurrentlyContext) -> ConsumeResult:
        assert context.message_queue.topic in (topic, f"%RETRY%{grp}")
        with lock:
            deliveries.extend((m.body, m.reconsume_times) for m in msgs)
        if any(m.body == b"dead" for m in msgs):
            context.delay_level_when_next_consume = -1  # no retries: straight to %DLQ%
            return ConsumeResult.RECONSUME_LATER
        if len(msgs) == 4 and msgs[0].reconsume_times == 0:
            context.ack_index = 1  # first two consumed, the last two retried
        return ConsumeResult.SUCCESS

    with Producer("PG_ctx", namesrv=cluster.namesrv) as p:
        p.send([Message(topic, b"m%d" % i) for i in range(4)])
    c = consumer(cluster.namesrv, grp, topic, listener, consume_message_batch_max_size=4)
    try:
        wait_until(lambda: len(deliveries) >= 6, 30, "4 deliveries + 2 retries")
        with Producer("PG_ctx2", namesrv=cluster.namesrv) as p:
            p.send(Message(topic, b"dead"))
        wait_until(lambda: any(b == b"dead" for b, _ in deliveries), 30, "dead delivered")
        time.sleep(2.5)
    finally:
        c.shutdown()
    assert Counter(b for b, _ in deliveries) == Counter({b"m0": 1, b"m1": 1, b"m2": 2, b"m3": 2, b"dead": 1})
    assert sorted(r for b, r in deliveries if b in (b"m2", b"m3")) == [0, 0, 1, 1]
    dlq = Collector()
    d = consumer(cluster.namesrv, group(), f"%DLQ%{grp}", dlq)
    try:
        wait_until(lambda: len(dlq) >= 1, 30, "dead in %DLQ%")
    finally:
        d.shutdown()
    assert dlq.bodies() == [b"dead"]


def test_broadcasting_offsets_survive_restart_with_named_instance(cluster: Cluster, tmp_path: Path) -> None:
    topic = cluster.topic(queues=2)
    grp = group()
    kw = {
        "message_model": MessageModel.BROADCASTING,
        "offset_store_dir": str(tmp_path),
        "instance_name": "bc1",
    }
    with Producer("PG_bcr", namesrv=cluster.namesrv) as p:
        for i in range(10):
            p.send(Message(topic, b"a%d" % i))
        first = Collector()
        c = consumer(cluster.namesrv, grp, topic, first, **kw)
        try:
            wait_until(lambda: len(first) >= 10, 20, "first 10")
        finally:
            c.shutdown()  # persists offsets.json
        for i in range(10):
            p.send(Message(topic, b"b%d" % i))
    second = Collector()
    c = consumer(cluster.namesrv, grp, topic, second, **kw)
    try:
        wait_until(lambda: len(second) >= 10, 20, "next 10")
        time.sleep(1.0)
    finally:
        c.shutdown()
    assert sorted(second.bodies()) == sorted(b"b%d" % i for i in range(10))


def test_route_refresh_picks_up_new_queues(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    quick = ClientConfig(
        rebalance_interval=1.0, poll_name_server_interval=1.0, persist_consumer_offset_interval=1.0
    )
    got = Collector()
    c = consumer(cluster.namesrv, group(), topic, got, client_config=quick)
    try:
        with Producer("PG_route", namesrv=cluster.namesrv, client_config=quick) as p:
            assert {p.send(Message(topic, b"x")).queue.queue_id for _ in range(8)} == {0, 1}
            cluster.admin("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4")
            wait_until(
                lambda: len([q for q in c.assigned_queues() if q.topic == topic]) == 4,
                20,
                "consumer sees 4 queues",
            )
            used = {p.send(Message(topic, b"y")).queue.queue_id for _ in range(16)}
            assert used == {0, 1, 2, 3}
        wait_until(lambda: len(got) >= 24, 20, "all 24 messages")
    finally:
        c.shutdown()


def test_sql92_subscription(cluster: Cluster) -> None:
    topic = cluster.topic(queues=2)
    with Producer("PG_sql", namesrv=cluster.namesrv) as p:
        for i in range(10):
            p.send(Message(topic, b"s%d" % i, tags="TagA" if i % 2 else "TagB", properties={"a": str(i)}))
    got = Collector()
    c = consumer(cluster.namesrv, group(), topic, got, MessageSelector.by_sql("a > 5 AND TAGS = 'TagA'"))
    try:
        wait_until(lambda: len(got) >= 2, 20, "SQL92-selected messages")
        time.sleep(1.0)
    finally:
        c.shutdown()
    assert sorted(got.bodies()) == [b"s7", b"s9"]
    # a broken expression is refused at start (CHECK_CLIENT_CONFIG), like RocketMQ's checkClientInBroker
    with pytest.raises(MQClientError):
        consumer(cluster.namesrv, group(), topic, Collector(), MessageSelector.by_sql("a >>> ("))


# -- message trace --------------------------------------------------------------------------------------
def test_message_trace_records_pub_and_sub(cluster: Cluster) -> None:
    topic = cluster.topic(queues=1)
    grp = group()
    got = Collector()
    c = consumer(cluster.namesrv, grp, topic, got, enable_msg_trace=True)
    try:
        with Producer("PG_trace", namesrv=cluster.namesrv, enable_msg_trace=True) as p:
            r = p.send(Message(topic, b"traced", tags="TagT", keys=["TK1"]))
        wait_until(lambda: len(got) >= 1, 20, "traced message consumed")
    finally:
        c.shutdown()  # flushes pending trace records
    traces = Collector()
    t = consumer(cluster.namesrv, group(), "RMQ_SYS_TRACE_TOPIC", traces)
    try:

        def records() -> list[list[str]]:
            out = []
            for body in traces.bodies():
                for rec in body.decode().split("\x02"):
                    if rec:
                        out.append(rec.split("\x01"))
            return out

        def kinds() -> set[str]:
            return {f[0] for f in records() if r.msg_id in f}

        wait_until(lambda: kinds() >= {"Pub", "SubBefore", "SubAfter"}, 20, "Pub/SubBefore/SubAfter records")
    finally:
        t.shutdown()
    pub = next(f for f in records() if f[0] == "Pub" and r.msg_id in f)
    assert pub[3] == "PG_trace" and pub[4] == topic and pub[6] == "TagT" and pub[7] == "TK1"
    assert pub[12] == r.offset_msg_id and pub[13] == "true"
    after = next(f for f in records() if f[0] == "SubAfter" and r.msg_id in f)
    assert after[4] == "true" and after[8] == grp


def test_lite_pull_pause_resume_seek_begin_end_and_auto_commit(cluster: Cluster) -> None:
    topic = cluster.topic(queues=1)
    mq = MessageQueue(topic, "broker-a", 0)
    with Producer("PG_lite3", namesrv=cluster.namesrv) as p:
        for i in range(10):
            p.send(Message(topic, b"P%d" % i))
    grp = group()
    lp = LitePullConsumer(
        grp, namesrv=cluster.namesrv, consume_from_where=FIRST, auto_commit_interval_millis=0
    )
    lp.assign([mq])
    lp.start()
    try:
        lp.pause([mq])
        assert lp.poll(timeout_ms=500) == []
        lp.resume([mq])
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(lp.poll(timeout_ms=500))
        assert [m.body for m in got] == [b"P%d" % i for i in range(10)]
        lp.seek_to_end(mq)
        assert lp.poll(timeout_ms=300) == []
        lp.seek_to_begin(mq)
        first: list = []
        deadline = time.monotonic() + 20
        while not first and time.monotonic() < deadline:
            first = lp.poll(timeout_ms=500)
        assert first[0].queue_offset == 0
        lp.seek_to_end(mq)
        lp.poll(timeout_ms=100)  # auto-commit (interval 0) on poll: the consumed position is committed
        assert lp.committed(mq) == 10
    finally:
        lp.shutdown()


def test_consume_timeout_sends_a_stuck_message_back(cluster: Cluster) -> None:
    topic = cluster.topic(queues=1)
    release = threading.Event()
    seen: list[int] = []

    def listener(msgs: list) -> ConsumeResult:
        seen.append(msgs[0].reconsume_times)
        if len(seen) == 1:
            release.wait(20)  # stuck far beyond the 2 s consume timeout
        return ConsumeResult.SUCCESS

    c = consumer(cluster.namesrv, group(), topic, listener, consume_timeout=2 / 60)
    try:
        with Producer("PG_timeout", namesrv=cluster.namesrv) as p:
            p.send(Message(topic, b"slow"))
        wait_until(lambda: len(seen) >= 2, 20, "redelivery of the stuck message")
    finally:
        release.set()
        c.shutdown()
    assert seen[:2] == [0, 1]
