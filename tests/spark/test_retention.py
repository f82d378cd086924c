"""Retention removed messages the reader still wants: failOnDataLoss=true raises, false skips them."""

from __future__ import annotations

import json

import pytest

from rocketq.spark.brokerio import get_io
from tests.interop.standalone import start_standalone

from .conftest import new_topic, produce, wait_for

ALL_HOURS = ";".join(f"{h:02d}" for h in range(24))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    sa = start_standalone(
        tmp_path_factory.mktemp("tiny"),
        {
            "brokerName": "broker-a",
            "mapedFileSizeCommitLog": str(64 * 1024),
            "mapedFileSizeConsumeQueue": str(20 * 50),
            "fileReservedTime": "0",
            "deleteWhen": ALL_HOURS,
        },
    )
    yield sa
    sa.stop()


def test_fail_on_data_loss(spark, tiny):
    ns = tiny.namesrv
    t = new_topic(ns, 1)
    produce(ns, t, [(0, b"x" * 1000 + str(i).encode(), None) for i in range(300)], keys=False)
    io = get_io(ns)
    q = (t, "broker-a", 0)
    min_off = wait_for(lambda: io.min_offsets([q])[q], 60)  # the clean service runs every 10 s
    assert 0 < min_off < 300
    start = json.dumps({t: {"broker-a": {"0": 0}}})

    def read(fail: str):
        return (
            spark.read.format("rocketmq")
            .option("nameserver", ns)
            .option("topic", t)
            .option("startingOffsets", start)
            .option("failOnDataLoss", fail)
            .load()
        )

    with pytest.raises(Exception, match="data loss"):
        read("true").collect()
    rows = read("false").select("queueOffset").collect()
    now_min = io.min_offsets([q])[q]
    offs = sorted(r.queueOffset for r in rows)
    assert offs and offs[0] >= min_off and offs[-1] == 299
    assert len(offs) == 300 - offs[0] and offs[0] <= now_min + 1
