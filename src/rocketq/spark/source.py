"""Readers of the "rocketmq" data source: batch (DataSourceReader) and Structured Streaming.

Facts from specs/spark.md this code relies on: the stream reader lives in one long-lived driver process and a
pickled copy runs read() on executors (so __init__ is cheap and clients are opened lazily, never pickled);
initialOffset() is not checkpointed and may be called more than once (cached here); offsets are compared by
JSON text (always built through options.canonical); commit()/stop() are not relied on for correctness.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rocketq.client.sync import submit

from .arrow_decode import BatchBuilder
from .brokerio import Queue, RocketMQSourceError, get_io
from .options import SourceOptions, canonical, flatten
from .planning import current_queues, rate_limit, resolve_ending, resolve_starting, split

log = logging.getLogger(__name__)

ARROW_BATCH_ROWS = 16384


class DataLossError(RocketMQSourceError):
    pass


@dataclass
class RocketMQInputPartition(InputPartition):
    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    def __init__(self, topic: str, broker: str, queue_id: int, start: int, end: int) -> None:
        self.topic, self.broker, self.queue_id, self.start, self.end = topic, broker, queue_id, start, end
        self.value = None


def _loss(o: SourceOptions, q: Queue, frm: int, to: int, why: str) -> None:
    msg = (
        f"data loss in {q[0]}/{q[1]}/{q[2]}: offsets [{frm}, {to}) are no longer available ({why}). "
        "Set failOnDataLoss=false to skip them."
    )
    if o.fail_on_data_loss:
        raise DataLossError(msg)
    log.warning("%s Skipped (failOnDataLoss=false).", msg)


def read_range(o: SourceOptions, p: RocketMQInputPartition) -> Iterator[Any]:
    """Pull [start, end) of one queue, following nextBeginOffset through tag-filter gaps.

    The next pull is requested as soon as a response's header says where it starts, before this thread
    decodes the body: the broker serves pull k+1 while we decode pull k."""
    if not isinstance(p, RocketMQInputPartition):
        return  # Spark plans one placeholder partition when partitions() returned none
    io = get_io(o.namesrv)
    q: Queue = (p.topic, p.broker, p.queue_id)
    b = BatchBuilder(p.topic, p.broker, p.queue_id, o.include_properties)
    off, end = p.start, p.end
    group, sub, batch = o.pull_group, o.sub_expression, o.pull_batch_size
    timeout_s = o.pull_timeout_ms / 1000.0
    pull = io.pull
    unfiltered = sub.strip() in ("*", "")

    def request(at: int):
        return submit(pull(group, q, at, min(batch, end - at), sub, timeout_s))

    fut = request(off) if off < end else None
    try:
        while fut is not None:
            r = fut.result(timeout_s + 5)
            fut = None
            start = off
            code, nxt = r.code, r.next_begin_offset
            if code != 21 and r.min_offset > off:  # retention removed the head of what we still need
                _loss(o, q, off, min(r.min_offset, end), f"min offset is now {r.min_offset}")
                off = r.min_offset
                fut = request(off) if off < end else None
                continue
            stop = False
            if code == 19 and nxt <= off:
                _loss(o, q, off, end, f"queue ends at {r.max_offset}")
                stop = True
            elif code == 21:
                if nxt > off:
                    _loss(o, q, off, min(nxt, end), f"min offset is now {r.min_offset}")
                else:
                    _loss(o, q, off, end, f"max offset is now {r.max_offset}")
                    stop = True
            if not stop:
                if nxt <= off:
                    raise RocketMQSourceError(f"pull {q}@{off} did not advance (code {code}, next {nxt})")
                off = nxt
                if off < end:
                    fut = request(off)  # prefetch before decoding
            if code == 0:
                got = b.add_body(memoryview(r.body), end)
                if unfiltered and got < min(nxt, end) - start:
                    # without a filter every offset in [start, next) is a message: the broker skipped
                    # records whose CommitLog segment retention already deleted
                    _loss(o, q, start, min(nxt, end), f"only {got} messages in the range were readable")
                if len(b) >= ARROW_BATCH_ROWS:
                    yield b.build()
            elif code == 20 and unfiltered:
                _loss(o, q, start, min(nxt, end), "the messages were being removed by retention")
        if len(b):
            yield b.build()
    finally:
        if fut is not None:
            fut.cancel()


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, o: SourceOptions) -> None:
        self.o = o

    def partitions(self) -> list[RocketMQInputPartition]:
        o = self.o
        io = get_io(o.namesrv)
        queues = current_queues(io, o)
        start = resolve_starting(io, o, queues)
        end = resolve_ending(io, o, queues)
        for q in queues:
            if o.starting == "json" and start[q] > end[q]:
                raise RocketMQSourceError(f"startingOffsets {start[q]} > endingOffsets {end[q]} for {q}")
        specs = split({q: (start[q], end[q]) for q in queues}, o)
        return [RocketMQInputPartition(*s.queue, s.start, s.end) for s in specs]

    def read(self, partition: RocketMQInputPartition) -> Iterator[Any]:
        return read_range(self.o, partition)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, o: SourceOptions) -> None:
        self.o = o
        self._initial: dict | None = None
        self._latest: dict[Queue, int] | None = None
        self._target: dict[Queue, int] | None = None  # availableNow
        self._last_batch_at = time.monotonic()
        self._published: dict | None = None

    def __getstate__(self) -> dict:
        # executors only need the options
        return {"o": self.o}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["o"])  # type: ignore[misc]

    # -- offsets -------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        if self._initial is None:
            io = get_io(self.o.namesrv)
            self._initial = canonical(resolve_starting(io, self.o, current_queues(io, self.o)))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.o.max_per_trigger:
            return ReadMaxRows(self.o.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        io = get_io(self.o.namesrv)
        self._target = io.max_offsets(current_queues(io, self.o))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        o = self.o
        io = get_io(o.namesrv)
        s = flatten(start)
        self._publish(s)
        queues = current_queues(io, o)
        latest = io.max_offsets(queues)
        self._latest = dict(latest)
        target = dict(latest)
        if self._target is not None:  # availableNow: never beyond what existed when the query started
            target = {q: min(v, self._target[q]) for q, v in latest.items() if q in self._target}
        for q, v in s.items():  # queues that vanished keep their position
            target.setdefault(q, v)
        for q in list(target):
            if q in s and target[q] < s[q]:
                # queue went backwards (deleted/recreated): data loss from the reader's view
                _loss(o, q, target[q], s[q], "the queue's max offset moved backwards")
                target[q] = s[q]
        end = rate_limit(s, target, limit.max_rows) if isinstance(limit, ReadMaxRows) else target
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else o.min_per_trigger
        if min_rows and self._target is None:
            avail = sum(max(0, end[q] - s.get(q, end[q])) for q in end)
            waited = (time.monotonic() - self._last_batch_at) * 1000
            if avail < min_rows and waited < o.max_trigger_delay_ms:
                return canonical(s) if s else canonical(end)
        out = canonical(end)
        if out != start:
            self._last_batch_at = time.monotonic()
        return out

    def reportLatestOffset(self) -> dict | None:
        return canonical(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[RocketMQInputPartition]:
        s, e = flatten(start), flatten(end)
        new = [q for q in e if q not in s]
        if new:  # queues that appeared after the start offset: from their earliest message
            s.update(get_io(self.o.namesrv).min_offsets(new))
        specs = split({q: (s[q], e[q]) for q in e}, self.o)
        return [RocketMQInputPartition(*x.queue, x.start, x.end) for x in specs]

    def read(self, partition: RocketMQInputPartition) -> Iterator[Any]:
        return read_range(self.o, partition)

    def commit(self, end: dict) -> None:
        self._publish(flatten(end))

    def _publish(self, offsets: dict[Queue, int]) -> None:
        """consumerGroup progress for mqadmin consumerProgress / the console (monitoring only)."""
        if not self.o.group or not offsets or offsets == self._published:
            return
        try:
            get_io(self.o.namesrv).publish_group_offsets(self.o.group, offsets)
            self._published = dict(offsets)
        except Exception as exc:
            log.warning("publishing progress of group %s failed: %s", self.o.group, exc)

    def stop(self) -> None:
        pass
