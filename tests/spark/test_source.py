"""Batch and streaming reads of format("rocketmq") against a real `rocketq standalone`."""

from __future__ import annotations

import json
import time

import pytest

from tests.interop.standalone import mqadmin_ok

from .conftest import produce, wait_for


def _read(spark, ns, **opts):
    r = spark.read.format("rocketmq").option("nameserver", ns)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_schema_and_tag_filter_with_offset_gaps(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(2)
    items = [(i % 2, f"m{i}".encode(), "TagB" if i % 3 == 0 else "TagA") for i in range(60)]
    produce(ns, t, items)
    df = _read(spark, ns, topic=t)
    assert df.schema.simpleString() == (
        "struct<topic:string,brokerName:string,queueId:int,queueOffset:bigint,msgId:string,tags:string,"
        "keys:array<string>,body:binary,properties:map<string,string>,bornTimestamp:timestamp,"
        "storeTimestamp:timestamp,reconsumeTimes:int,flag:int>"
    )
    rows = df.collect()
    assert len(rows) == 60
    r0 = next(r for r in rows if bytes(r.body) == b"m0")
    assert (r0.topic, r0.brokerName, r0.queueId, r0.queueOffset, r0.tags, r0.keys) == (
        t,
        "broker-a",
        0,
        0,
        "TagB",
        ["m0"],
    )
    assert r0.properties["TAGS"] == "TagB" and len(r0.msgId) == 32 and r0.storeTimestamp.year >= 2024

    # server-side tag filter: the pull loop follows nextBeginOffset across the gaps
    b = _read(spark, ns, topic=t, tags="TagB", pullBatchSize="4").collect()
    want = sorted(body.decode() for _, body, tag in items if tag == "TagB")
    assert sorted(bytes(r.body).decode() for r in b) == want
    offs = sorted((r.queueId, r.queueOffset) for r in b)
    assert offs[:3] == [(0, 0), (0, 3), (0, 6)]  # gaps of 2 between matches
    both = _read(spark, ns, topic=t, subExpression="TagA || TagB").count()
    assert both == 60
    lean = _read(spark, ns, topic=t, includeProperties="false")
    assert "properties" not in lean.columns and lean.filter("tags = 'TagB'").count() == 20


def test_json_offset_ranges_assign_and_timestamps(spark, rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(2)
    produce(ns, t, [(i % 2, f"x{i}".encode(), None) for i in range(40)])  # 20 per queue
    start = json.dumps({t: {"broker-a": {"0": 5, "1": -2}}})
    end = json.dumps({t: {"broker-a": {"0": 12, "1": 3}}})
    rows = _read(spark, ns, subscribe=t, startingOffsets=start, endingOffsets=end).collect()
    got = sorted((r.queueId, r.queueOffset) for r in rows)
    assert got == [(0, o) for o in range(5, 12)] + [(1, o) for o in range(0, 3)]

    assign = json.dumps({t: {"broker-a": [1]}})
    rows = _read(spark, ns, assign=assign).collect()
    assert {r.queueId for r in rows} == {1} and len(rows) == 20

    # split into many partitions: same rows
    df = _read(spark, ns, topic=t, maxMessagesPerPartition="3", minPartitions="4")
    assert df.rdd.getNumPartitions() >= 14 and df.count() == 40

    # startingTimestamp: only what was stored at/after the timestamp
    time.sleep(0.05)
    ts = int(time.time() * 1000)
    time.sleep(0.05)
    produce(ns, t, [(0, b"late1", None), (1, b"late2", None)])
    rows = _read(spark, ns, topic=t, startingTimestamp=str(ts)).collect()
    assert sorted(bytes(r.body) for r in rows) == [b"late1", b"late2"]
    rows = _read(spark, ns, topic=t, endingTimestamp=str(ts)).collect()
    assert len(rows) == 40

    by_ts = json.dumps({t: {"broker-a": {"0": ts}}})
    rows = _read(spark, ns, topic=t, startingOffsetsByTimestamp=by_ts,
                 startingOffsetsByTimestampStrategy="latest").collect()  # fmt: skip
    assert [bytes(r.body) for r in rows] == [b"late1"]  # queue 1 has no timestamp: starts at latest
    with pytest.raises(Exception, match="no timestamp"):
        _read(spark, ns, topic=t, startingOffsetsByTimestamp=by_ts).collect()

    rows = _read(spark, ns, subscribePattern=t[:-3] + ".*").select("topic").distinct().collect()
    assert t in {r.topic for r in rows}

    with pytest.raises(Exception, match="exactly one of"):
        _read(spark, ns, topic=t, subscribe=t).collect()


def test_a_missing_topic_is_one_error_when_the_query_is_analysed(spark, rmq, tmp_path):
    """Not an empty result, and not a failed task (whose traceback Spark logs before re-raising it)."""
    from pyspark.errors import AnalysisException

    ns = rmq.namesrv
    with pytest.raises(AnalysisException, match="NoSuchTopicR does not exist on the NameServer"):
        _read(spark, ns, subscribe="NoSuchTopicR").count()
    with pytest.raises(AnalysisException, match="NoSuchTopicS does not exist on the NameServer"):
        spark.readStream.format("rocketmq").option("nameserver", ns).option("topic", "NoSuchTopicS").load()
    df = spark.range(2).selectExpr("CAST(id AS STRING) AS body")
    with pytest.raises(AnalysisException, match="NoSuchTopicW does not exist on the NameServer"):
        df.write.format("rocketmq").option("nameserver", ns).option("topic", "NoSuchTopicW").mode(
            "append"
        ).save()


def _stream(spark, ns, t, ckpt, out, trigger="availableNow", **opts):
    r = spark.readStream.format("rocketmq").option("nameserver", ns).option("subscribe", t)
    for k, v in opts.items():
        r = r.option(k, v)
    w = (
        r.load()
        .selectExpr("topic", "queueId", "queueOffset", "CAST(body AS STRING) AS body")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
    )
    w = w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(processingTime=trigger)
    return w.start()


def test_stream_restart_from_checkpoint_no_loss_no_duplicates(spark, rmq, topic_factory, tmp_path):
    ns = rmq.namesrv
    t = topic_factory(2)
    ck, out = tmp_path / "ck", tmp_path / "out"
    produce(ns, t, [(i % 2, f"a{i}".encode(), None) for i in range(50)])
    q = _stream(spark, ns, t, ck, out, startingOffsets="earliest", consumerGroup="SparkProgressCG")
    q.awaitTermination(120)
    assert q.exception() is None
    produce(ns, t, [(i % 2, f"b{i}".encode(), None) for i in range(30)])
    q = _stream(spark, ns, t, ck, out, startingOffsets="earliest", consumerGroup="SparkProgressCG")
    q.awaitTermination(120)
    rows = spark.read.parquet(str(out)).collect()
    bodies = [r.body for r in rows]
    assert len(bodies) == 80 and len(set(bodies)) == 80
    # progress of the group is published to the broker: lag shows in mqadmin consumerProgress
    out_text = wait_for(
        lambda: (s := mqadmin_ok(ns, "consumerProgress", "-g", "SparkProgressCG")) and t in s and s, 20
    )
    assert t in out_text
    from rocketq.spark.brokerio import get_io

    io = get_io(ns)
    qs = io.read_queues([t])
    # the published progress is the stream's position: everything read, lag 0
    wait_for(lambda: io.group_offsets("SparkProgressCG", qs) == io.max_offsets(qs), 20)
    produce(ns, t, [(0, b"c0", None)])
    rows = _read(spark, ns, topic=t, startingOffsets="group", consumerGroup="SparkProgressCG").collect()
    assert [bytes(r.body) for r in rows] == [b"c0"]  # starts where the group is


def test_no_empty_micro_batches_while_idle(spark, rmq, topic_factory, tmp_path):
    ns = rmq.namesrv
    t = topic_factory(2)
    produce(ns, t, [(i % 2, f"i{i}".encode(), None) for i in range(10)])
    ck, out = tmp_path / "ck", tmp_path / "out"
    q = _stream(spark, ns, t, ck, out, "200 milliseconds", startingOffsets="earliest")
    try:
        wait_for(lambda: q.lastProgress and q.lastProgress["numInputRows"] >= 0 and q.recentProgress, 60)
        wait_for(lambda: sum(p["numInputRows"] for p in q.recentProgress) == 10, 60)
        time.sleep(3)  # idle: ~15 triggers
        batches = [p for p in q.recentProgress if p["numInputRows"] == 0 and "batchId" in p]
        ids = {p["batchId"] for p in q.recentProgress}
        produce(ns, t, [(0, b"late", None)])
        wait_for(lambda: sum(p["numInputRows"] for p in q.recentProgress) == 11, 60)
    finally:
        q.stop()
    # Spark reports idle triggers as progress without running a batch: the batch ids do not advance
    assert len(ids) <= 2, ids
    assert all(p["numInputRows"] == 0 for p in batches)
    assert spark.read.parquet(str(tmp_path / "out")).count() == 11


def test_available_now_with_max_messages_per_trigger(spark, rmq, topic_factory, tmp_path):
    ns = rmq.namesrv
    t = topic_factory(2)
    produce(ns, t, [(i % 2, f"n{i}".encode(), None) for i in range(100)])
    ck, out = tmp_path / "ck", tmp_path / "out"
    q = _stream(spark, ns, t, ck, out, startingOffsets="earliest", maxMessagesPerTrigger="30")
    q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [30, 30, 30, 10]
    latest = q.recentProgress[-1]["sources"][0]["latestOffset"]
    assert json.loads(latest) == {t: {"broker-a": {"0": 50, "1": 50}}}
    assert spark.read.parquet(str(tmp_path / "out")).count() == 100
