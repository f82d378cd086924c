"""Broker traffic counters for GET_BROKER_RUNTIME_INFO (mqadmin brokerStatus / clusterList): messages put and
transferred today and yesterday, and TPS over the last 10 s / 1 min. Counting is one integer add on the hot
path; sampling runs once a second.

The metrics exporter (rocketq.metrics) reads these too, and the per-group tables below, which the pull,
send-back and transaction paths keep per request (never per message of the send path)."""

from __future__ import annotations

import asyncio
import time
from collections import deque


class BrokerStats:
    def __init__(self) -> None:
        self.put = 0
        self.got = 0
        self.today = time.localtime().tm_yday
        self.put_today_start = 0
        self.got_today_start = 0
        self.put_yesterday = 0
        self.got_yesterday = 0
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=61)
        self.group_got: dict[str, int] = {}  # messages transferred per consumer group
        # acknowledged messages a forced clean deleted before a group had read them (broker/forced_clean.py)
        self.forced_clean_unconsumed = 0
        self._group_samples: dict[str, deque[tuple[float, int]]] = {}
        # (group, topic) -> [messages, bytes] pulled (rocketmq_messages_out_total / throughput_out_total)
        self.out: dict[tuple[str, str], list[int]] = {}
        # (group, topic, queue id) -> next offset the group will pull (inflight / ready messages)
        self.pull_offsets: dict[tuple[str, str, int], int] = {}
        self.dlq: dict[tuple[str, str], int] = {}  # (group, original topic) -> messages sent to %DLQ%group
        self.tx_commit: dict[str, int] = {}  # real topic -> transactional messages committed
        self.tx_rollback: dict[str, int] = {}  # real topic -> rolled back
        self._task: asyncio.Task[None] | None = None

    def pulled(self, group: str, topic: str, queue_id: int, count: int, size: int, next_offset: int) -> None:
        """A pull answered with ``count`` messages of ``size`` bytes (one call per pull, not per message)."""
        self.got += count
        self.group_got[group] = self.group_got.get(group, 0) + count
        key = (group, topic)
        out = self.out.get(key)
        if out is None:
            out = self.out[key] = [0, 0]
        out[0] += count
        out[1] += size
        self.pull_offsets[(group, topic, queue_id)] = next_offset

    def sent_to_dlq(self, group: str, topic: str) -> None:
        self.dlq[(group, topic)] = self.dlq.get((group, topic), 0) + 1

    def transaction_ended(self, topic: str, committed: bool) -> None:
        table = self.tx_commit if committed else self.tx_rollback
        table[topic] = table.get(topic, 0) + 1

    def forget_group(self, group: str) -> None:
        """A deleted group's tables (they are bounded by the groups that exist)."""
        self.group_got.pop(group, None)
        self._group_samples.pop(group, None)
        for table in (self.out, self.dlq):
            for key in [k for k in table if k[0] == group]:
                del table[key]
        for queue_key in [k for k in self.pull_offsets if k[0] == group]:
            del self.pull_offsets[queue_key]

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._sample_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _sample_loop(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(1.0)

    def sample(self) -> None:
        now = time.monotonic()
        self._samples.append((now, self.put, self.got))
        for group, n in self.group_got.items():
            dq = self._group_samples.get(group)
            if dq is None:
                dq = self._group_samples[group] = deque(maxlen=61)
            dq.append((now, n))
        day = time.localtime().tm_yday
        if day != self.today:
            self.today = day
            self.put_yesterday = self.put - self.put_today_start
            self.got_yesterday = self.got - self.got_today_start
            self.put_today_start, self.got_today_start = self.put, self.got

    def _tps(self, window_s: float) -> tuple[float, float]:
        if not self._samples:
            return 0.0, 0.0
        now = time.monotonic()
        base = self._samples[0]
        for s in self._samples:
            if now - s[0] <= window_s:
                base = s
                break
        dt = max(now - base[0], 1e-3)
        return (self.put - base[1]) / dt, (self.got - base[2]) / dt

    def group_tps(self, group: str) -> float:
        """Messages per second pulled by the group over the last minute."""
        dq = self._group_samples.get(group)
        if not dq:
            return 0.0
        t0, n0 = dq[0]
        dt = time.monotonic() - t0
        return (self.group_got.get(group, n0) - n0) / dt if dt > 0.5 else 0.0

    def table(self) -> dict[str, str]:
        put10, got10 = self._tps(10)
        put60, got60 = self._tps(60)
        return {
            "msgPutTotalTodayNow": str(self.put - self.put_today_start),
            "msgGetTotalTodayNow": str(self.got - self.got_today_start),
            "msgPutTotalYesterdayMorning": str(self.put_yesterday),
            "msgGetTotalYesterdayMorning": str(self.got_yesterday),
            "msgPutTotalTodayMorning": str(self.put_today_start),
            "msgGetTotalTodayMorning": str(self.got_today_start),
            "putTps": f"{put10:.2f} {put60:.2f} {put60:.2f}",
            "getTransferedTps": f"{got10:.2f} {got60:.2f} {got60:.2f}",
            "forcedCleanUnconsumedMessages": str(self.forced_clean_unconsumed),
        }
