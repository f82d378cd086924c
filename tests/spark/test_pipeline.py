"""`rocketq pipeline orders` end to end: generator -> Spark (two restarts) -> results topic + Parquet."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
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


def _run_until_interrupted(*args: str, timeout: float = 240) -> str:
    """The continuous pipeline through the CLI: once both queries have read new events, Ctrl-C (SIGINT);
    it must finish that batch, stop cleanly (exit 0, no traceback) and say so."""
    p = subprocess.Popen(
        [sys.executable, "-m", "rocketq.cli", "pipeline", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    busy = set()
    deadline = time.monotonic() + timeout
    try:
        assert p.stdout is not None
        for line in p.stdout:
            out.append(line)
            m = re.match(r"(orders_to_\w+) batch \d+: ([1-9]\d*) events in", line)
            if m:
                busy.add(m.group(1))
            if len(busy) == 2 or time.monotonic() > deadline:
                break
        assert len(busy) == 2, "".join(out)
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    text = "".join(out) + rest
    assert p.returncode == 0, text + err[-5000:]
    assert "Traceback" not in err, err[-5000:]
    assert "stopping: finishing the micro-batch in progress" in text and "\nstopped: " in text, text
    return text


def _in_process(spark, argv: list[str], capsys) -> str:
    """The same pipeline on the test session (saves a JVM start per run); returns what it printed."""
    from rocketq.pipeline.orders import parse_args, run

    capsys.readouterr()
    assert run(parse_args(argv[1:]), spark) == 0
    return capsys.readouterr().out


def test_orders_pipeline_end_to_end_with_restart(spark, rmq, tmp_path, capsys):
    ns = rmq.namesrv
    src, dst = new_topic(ns, 2, "orders"), new_topic(ns, 2, "orderstats")
    ck, out = tmp_path / "ck", tmp_path / "out"
    pipe = ["orders", "--namesrv", ns, "--topic", src, "--results-topic", dst, "--checkpoint", str(ck)]
    pipe += ["--output", str(out), "--available-now", "--watermark", "0 seconds", "--master", "local[2]"]
    gen = ["orders-gen", "--namesrv", ns, "--topic", src, "--step-ms", "500"]
    _run(*gen, "--orders", "60", "--start-ms", str(BASE_MS))
    n_events = len(list(events(60, 1, BASE_MS, 500, 7)))
    continuous = [a for a in pipe if a != "--available-now"] + ["--trigger", "1 second"]
    first = _run_until_interrupted(*continuous)  # through the CLI, stopped with Ctrl-C after its first batch
    assert f"orders_to_parquet batch 0: {n_events} events in" in first, first
    # more orders 10 minutes later in event time: the watermark passes 22:15, the new window stays open
    _run(*gen, "--orders", "40", "--first-order", "1000", "--start-ms", str(BASE_MS + 600_000))
    n_more = len(list(events(40, 1000, BASE_MS + 600_000, 500, 7)))
    second = _in_process(spark, pipe, capsys)  # restart from the checkpoint
    assert re.search(rf"^done: orders_to_parquet: \d+ batches, {n_more} events, ", second, re.M), second
    third = _in_process(spark, pipe, capsys)  # and again: nothing new, nothing repeated
    assert re.search(r"^done: orders_to_parquet: \d+ batches, 0 events, ", third, re.M), third

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
