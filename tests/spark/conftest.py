"""Spark connector fixtures: one SparkSession (local[2]) and one `rocketq standalone` per session."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed (pip install -e .[spark])")

from rocketq import Message, MessageQueue, Producer
from tests.interop.standalone import Standalone, mqadmin_ok, start_standalone

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def spark_conf(builder, master: str):
    return (
        builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    )


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    from rocketq.spark import register

    # local[2,2]: two cores, and a failed task is retried once (the exactly-once tests inject failures)
    s = spark_conf(SparkSession.builder.appName("rocketq-spark-tests"), "local[2,2]").getOrCreate()
    register(s)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def rmq(tmp_path_factory) -> Iterator[Standalone]:
    home = tmp_path_factory.mktemp("rmq")
    # small segments: the shared machine's disk is not ours to fill
    conf = {
        "brokerName": "broker-a",
        "flushIntervalCommitLog": "100",
        "mapedFileSizeCommitLog": str(32 * 1024 * 1024),
        "mapedFileSizeConsumeQueue": str(20 * 20_000),
        "diskMaxUsedSpaceRatio": "99",  # a busy shared disk must not trigger early retention here
        "diskSpaceCleanForciblyRatio": "99",
        "diskSpaceWarningLevelRatio": "99",
    }
    sa = start_standalone(home, conf)
    yield sa
    sa.stop()


_n = [0]


def new_topic(ns: str, queues: int = 2, prefix: str = "SparkT") -> str:
    _n[0] += 1
    topic = f"{prefix}{_n[0]}_{int(time.time() * 1000) % 100000}"
    mqadmin_ok(ns, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", str(queues), "-w", str(queues))
    return topic


def produce(ns: str, topic: str, items: list[tuple[int, bytes, str | None]], keys: bool = True) -> None:
    """items: (queueId, body, tag)."""
    with Producer("SparkTestPG", namesrv=ns) as p:
        for qid, body, tag in items:
            m = Message(topic, body, tags=tag, keys=[body.decode()] if keys else None)
            p.send(m, queue=MessageQueue(topic, "broker-a", qid))


@pytest.fixture
def topic_factory(rmq):
    return lambda queues=2: new_topic(rmq.namesrv, queues)


def wait_for(fn, timeout: float = 30.0, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
