"""Broker-side batch transactions (END_TRANSACTION_BATCH on half messages), driven like the sink does."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rocketq.protocol.properties import TRANS_OP_HALF_TOPIC
from rocketq.spark.sink import COMMIT, ROLLBACK, RocketMQCommitMessage, SinkOptions, _Sender, end_batch

from .conftest import wait_for


def _opts(ns: str, topic: str) -> SinkOptions:
    return SinkOptions(ns, topic, "exactly_once", "BatchTxnTestPG", 64, 8, 10.0, 120)


def _halves(o: SinkOptions, txn: str, bodies: list[str]) -> RocketMQCommitMessage:
    s = _Sender(o, txn)
    s.send_batch(pa.record_batch([pa.array([b.encode() for b in bodies], pa.binary())], names=["body"]))
    return RocketMQCommitMessage(txn, s.rows, s.halves, s.addrs)


def _visible(spark, ns, t) -> list[str]:
    df = spark.read.format("rocketmq").option("nameserver", ns).option("topic", t).load()
    return sorted(bytes(r.body).decode() for r in df.collect())


def test_commit_is_idempotent_and_orphans_roll_back(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(2)
    o = _opts(ns, t)
    m1 = _halves(o, "q1:0", ["a", "b", "c"])
    assert _visible(spark, ns, t) == []  # prepared: invisible
    r = end_batch(ns, t, "q1:0", COMMIT, o.group, [m1])
    assert r["broker-a"]["resolved"] == "3" and r["broker-a"]["repeated"] == "false"
    assert _visible(spark, ns, t) == ["a", "b", "c"]
    # a re-run of the same batch: new halves, the same transaction id -> no-op, the new halves roll back
    m2 = _halves(o, "q1:0", ["a", "b", "c"])
    r = end_batch(ns, t, "q1:0", COMMIT, o.group, [m2])
    assert r["broker-a"]["repeated"] == "true" and r["broker-a"]["rolledBack"] == "3"
    r = end_batch(ns, t, "q1:0", COMMIT, o.group, [m1])
    assert r["broker-a"]["already"] == "3" and r["broker-a"]["resolved"] == "0"
    assert _visible(spark, ns, t) == ["a", "b", "c"]


def test_abort_leaves_no_marker_and_unlisted_halves_expire(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(1)
    o = _opts(ns, t)
    aborted = _halves(o, "q2:5", ["x"])
    end_batch(ns, t, "q2:5", ROLLBACK, o.group, [aborted])
    # the batch is re-run after the abort and must still be able to commit
    ok = _halves(o, "q2:5", ["y"])
    orphan = _halves(o, "q2:5", ["zombie"])  # a task attempt whose result the driver never saw
    end_batch(ns, t, "q2:5", COMMIT, o.group, [ok])
    assert _visible(spark, ns, t) == ["y"]
    # the broker's scan (every 5 s) resolves the orphan from the marker: not listed -> rollback, which
    # appends its op record; it never becomes visible. (Waiting for the op count to grow past a count
    # taken here raced with a scan that ran during the read above.)
    [(orphan_qoff, _)] = orphan.halves["broker-a"]
    assert orphan_qoff not in [q for q, _ in ok.halves["broker-a"]]
    wait_for(lambda: orphan_qoff in _resolved_halves(spark, ns), 20)
    assert _visible(spark, ns, t) == ["y"]


def _resolved_halves(spark, ns: str) -> set[int]:
    """Queue offsets of the halves the broker has resolved: each op record's body is one."""
    df = spark.read.format("rocketmq").option("nameserver", ns).option("topic", TRANS_OP_HALF_TOPIC).load()
    return {int(bytes(r.body)) for r in df.collect()}


def _op_count(ns: str) -> int:
    from rocketq.spark.brokerio import get_io

    io = get_io(ns)
    qs = io.read_queues([TRANS_OP_HALF_TOPIC])
    return sum(io.max_offsets(qs).values())


def test_commit_of_expired_halves_fails_and_leaves_no_marker(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(1)
    o = _opts(ns, t)
    o.half_timeout_s = 1  # the broker treats these halves as orphans after 1 s
    old = _halves(o, "q3:0", ["late"])
    op_before = _op_count(ns)
    wait_for(lambda: _op_count(ns) > op_before, 20)  # the scan rolled it back
    with pytest.raises(Exception, match="already rolled back"):
        end_batch(ns, t, "q3:0", COMMIT, o.group, [old])
    # nothing was marked committed: the re-run of the batch commits normally
    o.half_timeout_s = 120
    rerun = _halves(o, "q3:0", ["late"])
    end_batch(ns, t, "q3:0", COMMIT, o.group, [rerun])
    assert _visible(spark, ns, t) == ["late"]
