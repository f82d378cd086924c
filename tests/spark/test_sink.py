"""The rocketmq sink: columns, at-least-once flush, exactly-once on broker half messages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from rocketq.protocol.properties import TRANS_HALF_TOPIC

from .conftest import produce


def _read_topic(spark, ns, t):
    return spark.read.format("rocketmq").option("nameserver", ns).option("topic", t).load()


def test_batch_sink_at_least_once_columns(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(4)
    df = spark.range(200).select(
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("body"),
        F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("tags"),
        F.array(F.concat(F.lit("k"), F.col("id").cast("string"))).alias("keys"),
        F.create_map(F.lit("src"), F.lit("spark")).alias("properties"),
        (F.col("id") % 7).cast("string").alias("shardingKey"),
    )
    df.write.format("rocketmq").option("nameserver", ns).option("topic", t).mode("append").save()
    rows = _read_topic(spark, ns, t).collect()  # write() returned only after every ack: all visible now
    assert sorted(bytes(r.body).decode() for r in rows) == sorted(f"v{i}" for i in range(200))
    r5 = next(r for r in rows if bytes(r.body) == b"v5")
    assert r5.tags == "odd" and r5.keys == ["k5"] and r5.properties["src"] == "spark"
    # one queue per sharding key (per-key order)
    per_key: dict[str, set[int]] = {}
    for r in rows:
        per_key.setdefault(r.properties["__SHARDINGKEY"], set()).add(r.queueId)
    assert all(len(v) == 1 for v in per_key.values())
    # filter by the tag written by the sink
    even = spark.read.format("rocketmq").option("nameserver", ns).option("topic", t).option("tags", "even")
    assert even.load().count() == 100


def test_sink_validates_columns_at_analysis_time(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(1)
    bad = spark.range(3).select(F.col("id").alias("body"))
    with pytest.raises(Exception, match="column body has type bigint"):
        bad.write.format("rocketmq").option("nameserver", ns).option("topic", t).mode("append").save()
    nobody = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match="unsupported sink columns"):
        nobody.write.format("rocketmq").option("nameserver", ns).option("topic", t).mode("append").save()
    notopic = spark.range(3).select(F.col("id").cast("string").alias("body"))
    with pytest.raises(Exception, match="target topic"):
        notopic.write.format("rocketmq").option("nameserver", ns).mode("append").save()


def _eo_query(spark, ns, src, dst, ck: Path, fail_once_dir: Path | None = None):
    df = (
        spark.readStream.format("rocketmq")
        .option("nameserver", ns)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "40")
        .load()
        .select("body", "keys")
    )
    if fail_once_dir is not None:
        marker = str(fail_once_dir)

        def boom(batches):
            import os

            from pyspark import TaskContext

            ctx = TaskContext.get()
            first = True
            for b in batches:
                yield b
                flag = os.path.join(marker, f"failed-{ctx.partitionId()}")
                if first and ctx.attemptNumber() == 0 and not os.path.exists(flag):
                    open(flag, "w").close()
                    raise RuntimeError("injected task failure after some rows were handed to the sink")
                first = False

        df = df.mapInArrow(boom, df.schema)
    return (
        df.writeStream.format("rocketmq")
        .option("nameserver", ns)
        .option("topic", dst)
        .option("deliveryGuarantee", "exactly_once")
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )


def test_exactly_once_under_injected_task_failure(spark, rmq, topic_factory, tmp_path):
    ns = rmq.namesrv
    src, dst = topic_factory(2), topic_factory(2)
    produce(ns, src, [(i % 2, f"e{i}".encode(), None) for i in range(100)])
    (tmp_path / "flags").mkdir()
    q = _eo_query(spark, ns, src, dst, tmp_path / "ck", tmp_path / "flags")
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    assert list((tmp_path / "flags").iterdir()), "the failure was not injected"
    bodies = [bytes(r.body).decode() for r in _read_topic(spark, ns, dst).collect()]
    assert sorted(bodies) == sorted(f"e{i}" for i in range(100))  # no loss, no duplicate
    # halves went through the half topic, and nothing prepared ever became visible twice
    halves = spark.read.format("rocketmq").option("nameserver", ns).option("topic", TRANS_HALF_TOPIC)
    assert halves.load().count() >= 100


def test_exactly_once_repeated_commit_is_a_noop(spark, rmq, topic_factory, tmp_path):
    ns = rmq.namesrv
    src, dst = topic_factory(2), topic_factory(2)
    produce(ns, src, [(i % 2, f"r{i}".encode(), None) for i in range(60)])
    ck = tmp_path / "ck"
    q = _eo_query(spark, ns, src, dst, ck)
    q.awaitTermination(180)
    assert q.exception() is None
    assert _read_topic(spark, ns, dst).count() == 60
    # Forget that the last batch was committed: Spark re-runs it with the SAME batch id, the sink writes new
    # halves and commits the same (query, batch) transaction again -> the broker's marker makes it a no-op.
    commits = sorted((ck / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    shutil.rmtree(ck / "commits" / f".{last.name}.crc", ignore_errors=True)
    (ck / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    q = _eo_query(spark, ns, src, dst, ck)
    q.awaitTermination(180)
    assert q.exception() is None
    assert int(json.loads(json.dumps(q.recentProgress[0]["batchId"]))) == int(last.name)
    bodies = [bytes(r.body).decode() for r in _read_topic(spark, ns, dst).collect()]
    assert sorted(bodies) == sorted(f"r{i}" for i in range(60))


def test_streaming_sink_at_least_once(spark, rmq, topic_factory, tmp_path):
    ns = rmq.namesrv
    src, dst = topic_factory(2), topic_factory(2)
    produce(ns, src, [(i % 2, f"s{i}".encode(), "T") for i in range(50)])
    q = (
        spark.readStream.format("rocketmq")
        .option("nameserver", ns)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("body", "tags", "CAST(queueId AS STRING) AS shardingKey")
        .writeStream.format("rocketmq")
        .option("nameserver", ns)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    rows = _read_topic(spark, ns, dst).collect()
    assert sorted(bytes(r.body).decode() for r in rows) == sorted(f"s{i}" for i in range(50))


def test_sink_explicit_queue_and_delay_level(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(4)
    df = spark.createDataFrame(
        [("q2-a", "broker-a", 2), ("q2-b", "broker-a", 2), ("q3", "broker-a", 3)],
        "body string, brokerName string, queueId int",
    )
    df.write.format("rocketmq").option("nameserver", ns).option("topic", t).mode("append").save()
    got = {bytes(r.body).decode(): (r.queueId, r.queueOffset) for r in _read_topic(spark, ns, t).collect()}
    assert {k: q for k, (q, _) in got.items()} == {"q2-a": 2, "q2-b": 2, "q3": 3}
    assert sorted(o for q, o in got.values() if q == 2) == [0, 1]

    t2 = topic_factory(1)
    delayed = spark.createDataFrame([("later", 1)], "body string, delayLevel int")  # level 1 = 1 s
    delayed.write.format("rocketmq").option("nameserver", ns).option("topic", t2).mode("append").save()
    assert _read_topic(spark, ns, t2).count() == 0  # parked in SCHEDULE_TOPIC_XXXX
    from .conftest import wait_for

    wait_for(lambda: _read_topic(spark, ns, t2).count() == 1, 30, 0.5)
