"""The stream reader's offset logic against a real broker, driven like Spark's driver drives it."""

from __future__ import annotations

import pickle
import time

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rocketq.spark.options import SourceOptions
from rocketq.spark.source import RocketMQStreamReader

from .conftest import produce


def _reader(ns: str, t: str, **opts: str) -> RocketMQStreamReader:
    return RocketMQStreamReader(SourceOptions.parse({"nameserver": ns, "subscribe": t, **opts}, True))


def test_min_messages_per_trigger_waits_at_most_max_trigger_delay(rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(2)
    r = _reader(ns, t, startingOffsets="earliest", minMessagesPerTrigger="10", maxTriggerDelay="1500ms")
    start = r.initialOffset()
    assert r.initialOffset() is start  # cached: Spark may ask twice
    assert start == {t: {"broker-a": {"0": 0, "1": 0}}}
    produce(ns, t, [(0, b"a", None), (1, b"b", None), (0, b"c", None)])
    assert r.latestOffset(start, ReadAllAvailable()) == start  # 3 < 10: wait
    assert r.reportLatestOffset() == {t: {"broker-a": {"0": 2, "1": 1}}}
    time.sleep(1.6)
    end = r.latestOffset(start, ReadAllAvailable())  # waited long enough
    assert end == {t: {"broker-a": {"0": 2, "1": 1}}}
    parts = r.partitions(start, end)
    assert [(p.queue_id, p.start, p.end) for p in parts] == [(0, 0, 2), (1, 0, 1)]
    assert r.partitions(end, end) == []
    # the copy Spark pickles for executors carries no clients and no driver state
    clone = pickle.loads(pickle.dumps(r))
    assert clone._initial is None and clone.o == r.o
    assert sum(b.num_rows for p in parts for b in clone.read(p)) == 3


def test_rate_limit_and_available_now_target(rmq, topic_factory):
    ns = rmq.namesrv
    t = topic_factory(2)
    produce(ns, t, [(i % 2, f"x{i}".encode(), None) for i in range(20)])
    r = _reader(ns, t, startingOffsets="earliest")
    r.prepareForTriggerAvailableNow()
    start = r.initialOffset()
    produce(ns, t, [(0, b"after-target", None)])
    end = r.latestOffset(start, ReadMaxRows(8))
    assert end == {t: {"broker-a": {"0": 4, "1": 4}}}
    end = r.latestOffset(end, ReadAllAvailable())
    assert end == {t: {"broker-a": {"0": 10, "1": 10}}}  # the message after the target is not included
    assert r.latestOffset(end, ReadAllAvailable()) == end
