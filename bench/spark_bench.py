"""Spark connector throughput: write N 100-byte messages through the sink, read them back with
format("rocketmq") (count and a groupBy), and compare with spark.read.parquet of the same rows.

    rocketq bench spark --messages 1000000 [--profile] [--write-docs]

Starts its own `rocketq standalone` (ASYNC_FLUSH, 4 queues) in a temp dir and a local[2] SparkSession.
--profile runs one read partition in the driver under cProfile and prints where the time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peers.sys_rocketq import DISK_GUARD  # noqa: E402
from tests.interop.standalone import mqadmin_ok, start_standalone  # noqa: E402

BROKER_CONF = {
    "brokerName": "broker-a",
    "flushDiskType": "ASYNC_FLUSH",
    "mapedFileSizeCommitLog": str(256 * 1024 * 1024),
    # bulk readers want big pulls; RocketMQ's default (32 messages / 256 KiB per pull) is tuned for
    # push consumers. Both runs below are reported.
    "maxTransferCountOnMessageInMemory": "2048",
    "maxTransferBytesOnMessageInMemory": str(4 * 1024 * 1024),
    **DISK_GUARD,  # a shared disk's fill level must not refuse the sends
}


def timed(fn):
    t0 = time.perf_counter()
    v = fn()
    return v, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--eo-messages", type=int, default=100_000, help="rows for the exactly_once write")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--default-pull", action="store_true", help="keep the broker's default 32-message pulls")
    a = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from rocketq.spark import register

    tmp = Path(tempfile.mkdtemp(prefix="spark_bench_"))
    conf = dict(BROKER_CONF)
    if a.default_pull:
        del conf["maxTransferCountOnMessageInMemory"], conf["maxTransferBytesOnMessageInMemory"]
    sa = start_standalone(tmp / "rmq", conf)
    load0 = os.getloadavg()[0]
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    ns = sa.namesrv
    results: list[tuple[str, int, float]] = []
    try:
        topic, eo_topic = "BenchSpark", "BenchSparkEO"
        for t in (topic, eo_topic):
            qn = str(a.queues)
            mqadmin_ok(ns, "updateTopic", "-c", "DefaultCluster", "-t", t, "-r", qn, "-w", qn)
        n = a.messages
        # 100-byte bodies: "m" + zero-padded id
        src = spark.range(n, numPartitions=2).select(F.format_string("m%099d", "id").alias("body"))
        src.write.format("noop").mode("overwrite").save()  # warm up the JVM and workers
        _, dt = timed(
            lambda: src.write.format("rocketmq").option("nameserver", ns).option("topic", topic)
            .mode("append").save()
        )  # fmt: skip
        results.append(("write: sink at_least_once (spark.range -> topic)", n, dt))
        eo = spark.range(a.eo_messages, numPartitions=2).select(F.format_string("m%099d", "id").alias("body"))
        try:
            _, dt = timed(
                lambda: eo.write.format("rocketmq").option("nameserver", ns).option("topic", eo_topic)
                .option("deliveryGuarantee", "exactly_once").mode("append").save()
            )  # fmt: skip
            results.append(("write: sink exactly_once (halves + one batch commit)", a.eo_messages, dt))
        except Exception as exc:  # keep measuring the rest
            print(f"exactly_once write failed: {str(exc).splitlines()[-2:]}", file=sys.stderr)

        df = spark.read.format("rocketmq").option("nameserver", ns).option("topic", topic).load()
        cnt, dt = timed(df.count)
        assert cnt == n, cnt
        results.append(("read rocketmq: count()", n, dt))
        _, dt = timed(lambda: df.groupBy("queueId").agg(F.count("*"), F.sum(F.length("body"))).collect())
        results.append(("read rocketmq: groupBy(queueId).agg(count, sum(length(body)))", n, dt))

        lean = (
            spark.read.format("rocketmq").option("nameserver", ns).option("topic", topic)
            .option("includeProperties", "false").load()
        )  # fmt: skip
        _, dt = timed(lean.count)
        results.append(("read rocketmq, includeProperties=false: count()", n, dt))
        _, dt = timed(lambda: lean.groupBy("queueId").agg(F.count("*"), F.sum(F.length("body"))).collect())
        results.append(("read rocketmq, includeProperties=false: groupBy (same)", n, dt))

        pq = str(tmp / "parquet")
        df.select("topic", "queueId", "queueOffset", "msgId", "body", "storeTimestamp").write.parquet(pq)
        pdf = spark.read.parquet(pq)
        _, dt = timed(pdf.count)
        results.append(("read parquet: count()", n, dt))
        _, dt = timed(lambda: pdf.groupBy("queueId").agg(F.count("*"), F.sum(F.length("body"))).collect())
        results.append(("read parquet: groupBy(queueId).agg(count, sum(length(body)))", n, dt))

        prof_text = ""
        if a.profile:
            prof_text = profile_one_partition(ns, topic)
    finally:
        spark.stop()
        sa.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()[0]
    cmd = "rocketq bench spark " + " ".join(sys.argv[1:])
    lines = [
        f"Command: `{cmd}` — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, 2 CPUs, local[2], "
        f"load average {load0:.1f} at start / {load1:.1f} at end, {n:,} messages of 100 bytes in "
        f"{a.queues} queues, broker pulls of "
        + ("32 messages (default)" if a.default_pull else "up to 2048 messages / 4 MiB")
        + ".",
        "",
        "| what | rows | seconds | rows/s |",
        "|---|---|---|---|",
    ]
    for what, rows, dt in results:
        lines.append(f"| {what} | {rows:,} | {dt:.2f} | {rows / dt:,.0f} |")
    text = "\n".join(lines)
    print(text)
    if prof_text:
        print(prof_text)
    return 0


def profile_one_partition(ns: str, topic: str) -> str:
    """cProfile of read() for queue 0 in this process (what one Python worker does)."""
    from rocketq.spark.brokerio import get_io
    from rocketq.spark.options import SourceOptions
    from rocketq.spark.source import RocketMQInputPartition, read_range

    o = SourceOptions.parse({"nameserver": ns, "topic": topic}, streaming=False)
    io = get_io(ns)
    q = (topic, "broker-a", 0)
    end = io.max_offsets([q])[q]
    p = RocketMQInputPartition(topic, "broker-a", 0, 0, end)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    rows = sum(b.num_rows for b in read_range(o, p))
    prof.disable()
    dt = time.perf_counter() - t0
    import io as _io

    s = _io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
    return f"\nprofile: one partition, {rows:,} rows in {dt:.2f} s ({rows / dt:,.0f} rows/s, one core)\n" + (
        s.getvalue()
    )


if __name__ == "__main__":
    sys.exit(main())
