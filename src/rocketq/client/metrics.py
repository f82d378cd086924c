"""Client metrics, opt in: the RocketMQ 5.x client's series (rocketmq-clients' MetricName), recorded by
rocketq's producers and push consumers into a prometheus_client registry.

    from rocketq.client import metrics
    metrics.enable()                      # before starting producers / consumers; the default registry
    prometheus_client.start_http_server(8000, addr="127.0.0.1")   # or the application's own /metrics

============================================  =========  ================================================
rocketmq_send_cost_time                       histogram  ms per send call; topic, client_id,
                                                         invocation_status (success / failure)
rocketmq_delivery_latency                     histogram  ms from the broker storing a message to the
                                                         consumer receiving it; topic, client_id,
                                                         consumer_group
rocketmq_await_time                           histogram  ms a received message waited for the listener
rocketmq_process_time                         histogram  ms the listener took; + invocation_status
rocketmq_consumer_cached_messages / _bytes    gauge      messages held in the consumer's process queues
============================================  =========  ================================================

Buckets are the Java client's. Producers and consumers started while metrics are disabled record
nothing: their send and consume paths then carry one ``is None`` test each.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

SEND_BUCKETS = (1.0, 5.0, 10.0, 20.0, 50.0, 200.0, 500.0)
DELIVERY_BUCKETS = (1.0, 5.0, 10.0, 20.0, 50.0, 200.0, 500.0)
AWAIT_BUCKETS = (1.0, 5.0, 20.0, 100.0, 1000.0, 5000.0, 10000.0)
PROCESS_BUCKETS = (1.0, 5.0, 10.0, 100.0, 1000.0, 10000.0, 60000.0)
_MAX_ARRIVALS = 200_000  # received messages whose arrival time is kept for rocketmq_await_time


class ClientMeter:
    def __init__(self, registry: Any = None) -> None:
        from prometheus_client import REGISTRY, Histogram

        registry = REGISTRY if registry is None else registry
        self.registry = registry
        consumer = ["topic", "client_id", "consumer_group"]
        self.send_cost = Histogram(
            "rocketmq_send_cost_time", "Send call cost time (milliseconds)",
            ["topic", "client_id", "invocation_status"], buckets=SEND_BUCKETS, registry=registry,
        )  # fmt: skip
        self.delivery = Histogram(
            "rocketmq_delivery_latency", "Latency from the broker storing a message to its delivery (ms)",
            consumer, buckets=DELIVERY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.await_time = Histogram(
            "rocketmq_await_time", "Time a received message awaited consumption (milliseconds)",
            consumer, buckets=AWAIT_BUCKETS, registry=registry,
        )  # fmt: skip
        self.process = Histogram(
            "rocketmq_process_time", "Time the message listener took (milliseconds)",
            [*consumer, "invocation_status"], buckets=PROCESS_BUCKETS, registry=registry,
        )  # fmt: skip
        self._consumers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._arrivals: dict[int, float] = {}
        self._lock = threading.Lock()
        self._cache = _CachedMessages(self)
        registry.register(self._cache)

    # -- producer -------------------------------------------------------------------------------
    def sent(self, topic: str, client_id: str, elapsed_s: float, ok: bool) -> None:
        status = "success" if ok else "failure"
        self.send_cost.labels(topic, client_id, status).observe(elapsed_s * 1000)

    # -- push consumer ----------------------------------------------------------------------------
    def attach(self, consumer: Any) -> None:
        self._consumers.add(consumer)

    def received(self, msgs: list[Any], group: str, client_id: str) -> None:
        now = time.time()
        arrivals = self._arrivals
        if len(arrivals) > _MAX_ARRIVALS:  # messages dropped without being consumed (rebalance)
            arrivals.clear()
        for m in msgs:
            arrivals[id(m)] = now
            stored = m.store_timestamp
            if stored > 0:
                self.delivery.labels(m.topic, client_id, group).observe(max(now * 1000 - stored, 0))

    def consumed(self, msgs: list[Any], group: str, client_id: str, started: float, ok: bool) -> None:
        now = time.time()
        status = "success" if ok else "failure"
        arrivals = self._arrivals
        for m in msgs:
            arrived = arrivals.pop(id(m), None)
            if arrived is not None:
                self.await_time.labels(m.topic, client_id, group).observe(max(started - arrived, 0) * 1000)
        if msgs:
            self.process.labels(msgs[0].topic, client_id, group, status).observe((now - started) * 1000)

    def unregister(self) -> None:
        for collector in (self.send_cost, self.delivery, self.await_time, self.process, self._cache):
            try:
                self.registry.unregister(collector)
            except KeyError:
                pass


class _CachedMessages:
    """rocketmq_consumer_cached_messages / _bytes from the running push consumers' process queues."""

    def __init__(self, meter: ClientMeter) -> None:
        self.meter = meter

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        labels = ["topic", "client_id", "consumer_group"]
        msgs = GaugeMetricFamily("rocketmq_consumer_cached_messages", "Messages cached", labels=labels)
        size = GaugeMetricFamily("rocketmq_consumer_cached_bytes", "Bytes cached", labels=labels)
        for consumer in list(self.meter._consumers):
            totals: dict[str, list[int]] = {}
            for mq, pq in list(getattr(consumer, "_pqs", {}).items()):
                t = totals.setdefault(mq.topic, [0, 0])
                t[0] += pq.msg_count
                t[1] += pq.msg_size
            client_id = getattr(consumer, "client_id", "") or ""
            for topic, (n, nbytes) in sorted(totals.items()):
                msgs.add_metric([topic, client_id, consumer.group], n)
                size.add_metric([topic, client_id, consumer.group], nbytes)
        yield msgs
        yield size


_meter: ClientMeter | None = None


def enable(registry: Any = None) -> ClientMeter:
    """Record client metrics into ``registry`` (prometheus_client's default one when None) from the
    producers and push consumers started from now on. Idempotent."""
    global _meter
    if _meter is None:
        _meter = ClientMeter(registry)
    return _meter


def disable() -> None:
    """Stop recording for clients started from now on, and take the series out of the registry."""
    global _meter
    if _meter is not None:
        _meter.unregister()
        _meter = None


def current() -> ClientMeter | None:
    return _meter
