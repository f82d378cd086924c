"""Dashboard history: every interval, each broker's put / get TPS (its runtime info) and each topic's message
rate (the growth of the sum of its queues' max offsets over every master), kept in memory for the charts.

Bounded: ``points`` samples per series, at most MAX_TOPICS topics sampled per round (system, retry and DLQ
topics left out), a few requests in flight at once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rocketq.admin import AdminClient, AdminError

from .topics import is_internal_topic

log = logging.getLogger("rocketq.console")

MAX_TOPICS = 500
CONCURRENCY = 8


def first_float(text: str) -> float:
    """The first number of a runtime-info value such as putTps "12.50 11.00 10.00" (10 s, 1 min, 10 min)."""
    try:
        return float(text.split()[0]) if text else 0.0
    except ValueError:
        return 0.0


@dataclass(slots=True)
class Series:
    points: deque[tuple[int, float]]

    def add(self, t_ms: int, v: float) -> None:
        self.points.append((t_ms, round(v, 3)))


@dataclass(slots=True)
class History:
    points: int
    brokers_in: dict[str, Series] = field(default_factory=dict)
    brokers_out: dict[str, Series] = field(default_factory=dict)
    topics: dict[str, Series] = field(default_factory=dict)
    topic_totals: dict[str, int] = field(default_factory=dict)  # messages held (sum of max offsets)
    last_sample_ms: int = 0

    def series(self, table: dict[str, Series], key: str) -> Series:
        s = table.get(key)
        if s is None:
            s = table[key] = Series(deque(maxlen=self.points))
        return s


class Collector:
    def __init__(self, admin: AdminClient, interval_s: float, points: int) -> None:
        self.admin = admin
        self.interval_s = interval_s
        self.history = History(points)
        self._offsets: dict[str, tuple[float, int]] = {}  # topic -> (monotonic time, sum of max offsets)
        self._task: asyncio.Task[None] | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        while True:
            try:
                await self.sample()
                self.last_error = None
            except AdminError as exc:
                self.last_error = str(exc)
            except Exception as exc:  # never let the dashboard's sampler die
                self.last_error = str(exc)
                log.exception("console: dashboard sampling failed")
            await asyncio.sleep(self.interval_s)

    async def sample(self) -> None:
        admin = self.admin
        now_ms = int(time.time() * 1000)
        info = await admin.cluster_info()
        sem = asyncio.Semaphore(CONCURRENCY)

        async def runtime(name: str, bid: str, addr: str) -> None:
            async with sem:
                try:
                    rt = await admin.broker_runtime_info(addr)
                except AdminError:
                    return
            key = name if str(bid) == "0" else f"{name}#{bid}"
            h = self.history
            h.series(h.brokers_in, key).add(now_ms, first_float(rt.get("putTps", "")))
            out = rt.get("getTransferedTps", rt.get("getTransferredTps", ""))
            h.series(h.brokers_out, key).add(now_ms, first_float(out))

        jobs = [
            runtime(name, bid, addr)
            for name, data in info["brokerAddrTable"].items()
            for bid, addr in ((data or {}).get("brokerAddrs") or {}).items()
        ]
        await asyncio.gather(*jobs)
        topics = [t for t in await admin.topic_list() if not is_internal_topic(t, info)][:MAX_TOPICS]

        async def topic_rate(topic: str) -> None:
            async with sem:
                try:
                    rows = await admin.topic_stats(topic)
                except AdminError:
                    return
            total = sum(r.max_offset for r in rows)
            t = time.monotonic()
            prev = self._offsets.get(topic)
            self._offsets[topic] = (t, total)
            self.history.topic_totals[topic] = total
            if prev is not None and t > prev[0]:
                rate = max(0, total - prev[1]) / (t - prev[0])
                self.history.series(self.history.topics, topic).add(now_ms, rate)

        await asyncio.gather(*(topic_rate(t) for t in topics))
        gone = set(self._offsets) - set(topics)
        for t in gone:  # a deleted topic leaves the charts
            self._offsets.pop(t, None)
            self.history.topics.pop(t, None)
            self.history.topic_totals.pop(t, None)
        self.history.last_sample_ms = now_ms

    def snapshot(self, top: int = 10) -> dict[str, Any]:
        """Chart data: broker in/out series and the ``top`` busiest topics' series (by their latest rate)."""
        h = self.history

        def pts(s: Series) -> list[list[float]]:
            return [[t, v] for t, v in s.points]

        def latest(s: Series) -> float:
            recent = list(s.points)[-6:]
            return sum(v for _, v in recent) / len(recent) if recent else 0.0

        busiest = sorted(
            h.topics.items(), key=lambda kv: (-latest(kv[1]), -h.topic_totals.get(kv[0], 0), kv[0])
        )[:top]
        return {
            "intervalSeconds": self.interval_s,
            "lastSample": h.last_sample_ms,
            "lastError": self.last_error,
            "brokersIn": {k: pts(s) for k, s in sorted(h.brokers_in.items())},
            "brokersOut": {k: pts(s) for k, s in sorted(h.brokers_out.items())},
            "topics": {k: pts(s) for k, s in busiest},
            "topTopics": [
                {"topic": k, "tps": round(latest(s), 2), "messages": h.topic_totals.get(k, 0)}
                for k, s in busiest
            ],
        }
