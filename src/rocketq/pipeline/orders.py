"""The orders pipeline: order events from a RocketMQ topic -> per-status counts and amounts per event-time
window -> a results topic and Parquet.

Two streaming queries read the same source, each with its own checkpoint under --checkpoint:
  <checkpoint>/parquet  -> Parquet files under --output (Spark's file sink: exactly-once with its log)
  <checkpoint>/topic    -> the results topic (the rocketmq sink with deliveryGuarantee=exactly_once)
so a restart from the checkpoint neither loses nor repeats a result row in either output. Windows are
emitted once the watermark passes their end (append mode).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any

EVENT_SCHEMA = "orderId string, status string, amount double, eventTime long"
STATUSES = ("created", "paid", "shipped", "completed")


def build_session(master: str, app: str = "rocketq-orders-pipeline") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from rocketq.spark import register

    spark = (
        SparkSession.builder.appName(app)
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # the pipeline prints its own progress lines
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    register(spark)
    return spark


def aggregate(spark: Any, namesrv: str, topic: str, window: str, watermark: str, max_per_trigger: int | None):
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("rocketmq")
        .option("nameserver", namesrv)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("consumerGroup", "ORDERS_PIPELINE")  # progress visible in mqadmin consumerProgress
    )
    if max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(max_per_trigger))
    ev = F.from_json(F.col("body").cast("string"), EVENT_SCHEMA)
    events = (
        reader.load()
        .select(ev.alias("e"))
        .select("e.*")
        .withColumn("eventTime", F.timestamp_millis(F.col("eventTime")))
        .withWatermark("eventTime", watermark)
        .where(F.col("status").isin(*STATUSES))
    )
    return (
        events.groupBy(F.window("eventTime", window).alias("w"), "status")
        .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount"))
        .select(
            F.col("w.start").alias("windowStart"),
            F.col("w.end").alias("windowEnd"),
            "status",
            "orders",
            "amount",
        )
    )


def start(args: argparse.Namespace, spark: Any) -> list[Any]:
    from pyspark.sql import functions as F

    stats = aggregate(spark, args.namesrv, args.topic, args.window, args.watermark, args.max_per_trigger)

    def trig(w):
        return w.trigger(availableNow=True) if args.available_now else w.trigger(processingTime=args.trigger)

    to_parquet = trig(
        stats.writeStream.format("parquet")
        .option("path", args.output)
        .option("checkpointLocation", os.path.join(args.checkpoint, "parquet"))
        .outputMode("append")
        .queryName("orders_to_parquet")
    ).start()
    to_topic = trig(
        stats.select(
            F.to_json(F.struct(*stats.columns)).alias("body"),
            F.col("status").alias("tags"),
            F.concat_ws("|", F.col("windowStart").cast("string"), "status").alias("keys"),
        )
        .writeStream.format("rocketmq")
        .option("nameserver", args.namesrv)
        .option("topic", args.results_topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("checkpointLocation", os.path.join(args.checkpoint, "topic"))
        .outputMode("append")
        .queryName("orders_to_topic")
    ).start()
    return [to_parquet, to_topic]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="rocketq pipeline orders", description=__doc__)
    ap.add_argument("--namesrv", "-n", default="127.0.0.1:9876")
    ap.add_argument("--topic", default="orders", help="source topic of order events")
    ap.add_argument("--results-topic", default="order-stats")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--output", required=True, help="Parquet directory")
    ap.add_argument("--window", default="1 minute")
    ap.add_argument("--watermark", default="10 seconds")
    ap.add_argument("--trigger", default="5 seconds", help="processing-time trigger interval")
    ap.add_argument("--available-now", action="store_true", help="process what is there, then exit")
    ap.add_argument("--max-per-trigger", type=int, default=None)
    ap.add_argument("--master", default="local[2]")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    print(f"orders pipeline: {a.topic} -> {a.output} (Parquet) and {a.results_topic}; Spark {a.master}")
    spark = build_session(a.master)
    # after the SparkSession: PySpark's own SIGINT handler cancels jobs and raises inside py4j calls, which
    # prints tracebacks; here Ctrl-C and SIGTERM only ask run() to stop the queries
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        return run(a, spark, stop)
    finally:
        spark.stop()


def run(a: argparse.Namespace, spark: Any, stop: threading.Event | None = None) -> int:
    """Start both queries, print a line per micro-batch, and a summary when they end (--available-now) or
    ``stop`` is set (the batch in progress is finished first unless ``stop`` is set again)."""
    stop = stop or threading.Event()
    queries = start(a, spark)
    progress = Progress(queries)
    if not a.available_now:
        print(f"running: a micro-batch every {a.trigger}; Ctrl-C stops (it resumes from {a.checkpoint})")
    while not stop.is_set() and any(q.isActive for q in queries):
        progress.report()
        stop.wait(1.0)
    interrupted = stop.is_set()
    if interrupted:
        print("stopping: finishing the micro-batch in progress (Ctrl-C again: abandon it)", flush=True)
        stop.clear()
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline and any(_busy(q) for q in queries):
            progress.report()
            stop.wait(0.5)
        spark.sparkContext.setLogLevel("OFF")  # stopping interrupts running tasks: Spark logs that as errors
        for q in queries:
            q.stop()
    progress.report()
    failed = [q for q in queries if q.exception() is not None]
    for q in failed:
        print(f"{q.name} failed: {q.exception().desc}", file=sys.stderr)  # type: ignore[union-attr]
    print(progress.summary(a, interrupted), flush=True)
    return 1 if failed else 0


def _busy(q: Any) -> bool:
    return bool(q.isActive and q.status.get("isTriggerActive"))


def _get(obj: Any, name: str, default: Any = 0) -> Any:
    """A field of a (PySpark 4) progress object, or of the dict older versions return."""
    value = getattr(obj, name, None)
    if value is None and isinstance(obj, dict):
        value = obj.get(name)
    return default if value is None else value


class Progress:
    """One line per finished micro-batch of each query, and the totals for the summary."""

    def __init__(self, queries: list[Any]) -> None:
        self.queries = queries
        self.seen: dict[str, int] = {}  # query name -> last batch id printed
        self.batches: dict[str, int] = {}
        self.rows_in: dict[str, int] = {}
        self.windows_out: dict[str, int] = {}
        self.open: dict[str, int] = {}

    def report(self) -> None:
        for q in self.queries:
            name = q.name
            for p in q.recentProgress:
                batch = _get(p, "batchId", -1)
                if batch <= self.seen.get(name, -1):
                    continue
                self.seen[name] = batch
                rows = _get(p, "numInputRows")
                ops = _get(p, "stateOperators", [])
                closed = sum(_get(op, "numRowsRemoved") for op in ops)  # append mode: evicted = written
                open_ = sum(_get(op, "numRowsTotal") for op in ops)
                self.batches[name] = self.batches.get(name, 0) + 1
                self.rows_in[name] = self.rows_in.get(name, 0) + rows
                self.windows_out[name] = self.windows_out.get(name, 0) + closed
                self.open[name] = open_
                watermark = _get(_get(p, "eventTime", {}), "watermark", "-")
                print(
                    f"{name} batch {batch}: {rows} events in, {closed} window rows out, "
                    f"{open_} open, watermark {watermark}",
                    flush=True,
                )

    def summary(self, a: argparse.Namespace, interrupted: bool) -> str:
        how = "stopped" if interrupted else "done"
        parts = [
            f"{name}: {self.batches.get(name, 0)} batches, {self.rows_in.get(name, 0)} events, "
            f"{self.windows_out.get(name, 0)} window rows written, {self.open.get(name, 0)} still open"
            for name in (q.name for q in self.queries)
        ]
        return (
            f"{how}: " + "; ".join(parts) + f". Open windows are written once the watermark passes them; "
            f"the next run resumes from {a.checkpoint}."
        )
