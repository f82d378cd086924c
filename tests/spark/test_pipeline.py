"""`rocketq pipeline orders` end to end: generator -> Spark (two restarts) -> results topic + Parquet."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime

from rocketq.pipeline.orders_gen import events

from .conftest import new_topic

BASE_MS = 1_700_000_040_000  # a minute boundary


def _run(*args: str, timeout: float = 240) -> str:
    p = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "pipeline", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    return p.stdout


def _in_process(spark, argv: list[str]) -> None:
    """The same pipeline on the test session (saves a JVM start per run)."""
    from rocketq.pipeline.orders import parse_args, start

    for q in start(parse_args(argv[1:]), spark):
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()


def test_orders_pipeline_end_to_end_with_restart(spark, rmq, tmp_path):
    ns = rmq.namesrv
    src, dst = new_topic(ns, 2, "orders"), new_topic(ns, 2, "orderstats")
    ck, out = tmp_path / "ck", tmp_path / "out"
    pipe = ["orders", "--namesrv", ns, "--topic", src, "--results-topic", dst, "--checkpoint", str(ck)]
    pipe += ["--output", str(out), "--available-now", "--watermark", "0 seconds", "--master", "local[2]"]
    gen = ["orders-gen", "--namesrv", ns, "--topic", src, "--step-ms", "500"]
    _run(*gen, "--orders", "60", "--start-ms", str(BASE_MS))
    _run(*pipe)  # first run, through the CLI: the 22:14 window closes, 22:15 stays open in the state
    # more orders 10 minutes later in event time: the watermark passes 22:15, the new window stays open
    _run(*gen, "--orders", "40", "--first-order", "1000", "--start-ms", str(BASE_MS + 600_000))
    _in_process(spark, pipe)  # restart from the checkpoint
    _in_process(spark, pipe)  # and again: nothing new, nothing repeated

    expected: Counter = Counter()
    runs = ((1, 60, BASE_MS), (1000, 40, BASE_MS + 600_000))
    evs = [ev for f, n, t0 in runs for _, ev in events(n, f, t0, 500, 7)]
    watermark = max(ev["eventTime"] for ev in evs)  # delay 0: windows ending at/before it are final
    for ev in evs:
        start = ev["eventTime"] // 60_000 * 60_000
        if start + 60_000 <= watermark:
            w = datetime.fromtimestamp(start / 1000, UTC).replace(tzinfo=None)
            expected[(w, ev["status"])] += 1
    assert len({k[0] for k in expected}) == 2  # 22:14 and 22:15

    got = Counter()
    for r in spark.read.parquet(str(out)).collect():
        assert (r.windowStart, r.status) not in got, "duplicate result row in Parquet"
        got[(r.windowStart, r.status)] = r.orders
    assert got == expected

    rows = spark.read.format("rocketmq").option("nameserver", ns).option("topic", dst).load().collect()
    from_topic = Counter()
    for r in rows:
        d = json.loads(bytes(r.body))
        key = (datetime.fromisoformat(d["windowStart"]).replace(tzinfo=None), d["status"])
        assert key not in from_topic, "duplicate result message in the results topic"
        from_topic[key] = d["orders"]
        assert r.tags == d["status"]
    assert from_topic == expected
