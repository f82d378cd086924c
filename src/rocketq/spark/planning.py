"""Driver-side planning: which queues, where to start and stop, how to split into input partitions."""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

from .brokerio import BrokerIO, Queue, RocketMQSourceError
from .options import EARLIEST, LATEST, SourceOptions

log = logging.getLogger(__name__)


def current_queues(io: BrokerIO, o: SourceOptions) -> list[Queue]:
    if o.assign is not None:
        return sorted(o.assign)
    if o.pattern is not None:
        rx = re.compile(o.pattern)
        topics = [t for t in io.list_topics() if rx.fullmatch(t)]
    else:
        topics = o.topics
    return io.read_queues(topics)


def resolve_starting(io: BrokerIO, o: SourceOptions, queues: list[Queue]) -> dict[Queue, int]:
    """Concrete next-offsets for every queue from startingOffsets / startingTimestamp / ByTimestamp."""
    if not queues:
        return {}
    mins = io.min_offsets(queues)
    maxs = io.max_offsets(queues)
    if o.starting_by_ts is not None:
        missing = [q for q in queues if q not in o.starting_by_ts]
        if missing and o.ts_strategy == "error":
            raise RocketMQSourceError(f"startingOffsetsByTimestamp has no timestamp for {missing}")
        found = io.offsets_by_time(
            [q for q in queues if q in o.starting_by_ts], lambda q: o.starting_by_ts[q]
        )
        return {q: found.get(q, maxs[q]) for q in queues}
    if o.starting_ts is not None:
        return io.offsets_by_time(queues, o.starting_ts)
    if o.starting == "earliest":
        return dict(mins)
    if o.starting == "latest":
        return dict(maxs)
    if o.starting == "group":
        assert o.group
        got = io.group_offsets(o.group, queues)
        # no committed offset yet: start at earliest (documented)
        return {q: (got[q] if got[q] >= 0 else mins[q]) for q in queues}
    spec = o.starting_json or {}
    if o.assign is not None:
        spec = {**o.assign, **spec}
    out = {}
    for q in queues:
        v = spec.get(q, EARLIEST)
        out[q] = mins[q] if v == EARLIEST else maxs[q] if v == LATEST else v
    return out


def resolve_ending(io: BrokerIO, o: SourceOptions, queues: list[Queue]) -> dict[Queue, int]:
    if not queues:
        return {}
    maxs = io.max_offsets(queues)
    if o.ending_ts is not None:
        return io.offsets_by_time(queues, o.ending_ts)
    if o.ending == "json":
        spec = o.ending_json or {}
        mins = io.min_offsets(queues)
        out = {}
        for q in queues:
            v = spec.get(q, LATEST)
            out[q] = maxs[q] if v == LATEST else mins[q] if v == EARLIEST else min(v, maxs[q])
        return out
    return maxs


def rate_limit(start: dict[Queue, int], latest: dict[Queue, int], limit: int) -> dict[Queue, int]:
    """Kafka's prorating of maxOffsetsPerTrigger: each queue gets limit * its share of the backlog
    (ceil for shares < 1 so small queues still move, floor otherwise); never beyond latest."""
    backlog = {q: max(0, latest[q] - start.get(q, latest[q])) for q in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for q, lat in latest.items():
        s = start.get(q, lat)
        share = limit * backlog[q] / total
        n = math.ceil(share) if share < 1 else math.floor(share)
        out[q] = min(lat, s + n)
    return out


@dataclass(frozen=True)
class RocketMQPartitionSpec:
    queue: Queue
    start: int
    end: int


def split(ranges: dict[Queue, tuple[int, int]], o: SourceOptions) -> list[RocketMQPartitionSpec]:
    """One partition per queue with data, split by maxMessagesPerPartition and to reach minPartitions."""
    parts = []
    for q in sorted(ranges):
        s, e = ranges[q]
        if e <= s:
            continue
        step = o.max_per_partition or (e - s)
        for a in range(s, e, step):
            parts.append(RocketMQPartitionSpec(q, a, min(e, a + step)))
    if o.min_partitions and 0 < len(parts) < o.min_partitions:
        total = sum(p.end - p.start for p in parts)
        out = []
        for p in parts:
            n = max(1, round(o.min_partitions * (p.end - p.start) / total))
            step = max(1, math.ceil((p.end - p.start) / n))
            out.extend(
                RocketMQPartitionSpec(p.queue, a, min(p.end, a + step)) for a in range(p.start, p.end, step)
            )
        parts = out
    return parts
