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
import sys
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
    spark = build_session(a.master)
    queries = start(a, spark)
    try:
        for q in queries:
            q.awaitTermination()
    except KeyboardInterrupt:
        for q in queries:
            q.stop()
    failed = [q for q in queries if q.exception() is not None]
    for q in failed:
        print(f"{q.name} failed: {q.exception()}", file=sys.stderr)
    spark.stop()
    return 1 if failed else 0
