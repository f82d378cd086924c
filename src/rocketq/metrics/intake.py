"""Messages and bytes stored into each topic, read off the consume queues when metrics are scraped.

The send path keeps no per-topic counter: every message it stores already gets a 20-byte ConsumeQueue unit
holding the record's size, written before the send is answered. A scrape reads the units appended to each
queue since the last one and adds their count and sizes to the topic's totals and the message size
histogram. The cost is paid by the scrape thread (about one C-level pass over the new units' bytes), not
by the send path, and not at all while nobody scrapes.

Counted since the exporter started, as RocketMQ's counters are since the broker started. Units that
retention deleted before a scrape read them are skipped (a queue scraped less often than its whole
retention time loses that part of the count). At most ``MAX_UNITS_PER_SCRAPE`` units are read per scrape;
the rest are counted by the next ones.
"""

from __future__ import annotations

import logging
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CQ_UNIT_SIZE = 20
BLANK_UNIT_SIZE = 0x7FFFFFFF  # a filler unit's size field (consume_queue.BLANK_UNIT_SIZE)
# RocketMQ's rocketmq_message_size buckets: 1 KiB, 4 KiB, 512 KiB, 1 MiB, 2 MiB, 4 MiB (bytes)
SIZE_BUCKETS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
MAX_UNITS_PER_SCRAPE = 5_000_000
_CHUNK_UNITS = 65_536  # units per C-level pass: bounds how long the scrape thread holds the GIL at once
_SWAP = sys.byteorder == "little"  # the units are big-endian
assert array("I").itemsize == 4
log = logging.getLogger(__name__)


@dataclass(slots=True)
class TopicIntake:
    messages: int = 0
    bytes: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(SIZE_BUCKETS) + 1))  # not cumulative


def unit_sizes(units: bytes | memoryview) -> array:
    """The size field of each 20-byte unit, as an array of unsigned ints."""
    words = memoryview(units).cast("B").cast("I")  # 5 words per unit; the size is word 2
    sizes = array("I")
    sizes.frombytes(words[2::5].tobytes())
    if _SWAP:
        sizes.byteswap()
    return sizes


class IncomingTraffic:
    def __init__(self) -> None:
        self.cursor: dict[tuple[str, int], int] = {}  # next unit to read per queue
        self.topics: dict[str, TopicIntake] = {}
        self.skipped = 0  # units retention deleted before they were read
        self.started = False

    def baseline(self, queues: Iterable[tuple[str, int, Any]]) -> None:
        """Start counting from each queue's current end (at broker start: earlier messages are not new)."""
        for topic, qid, cq in queues:
            self.cursor[(topic, qid)] = cq.get_max_offset_in_queue()
        self.started = True

    def advance(
        self, queues: Iterable[tuple[str, int, Any, int]], budget: int = MAX_UNITS_PER_SCRAPE
    ) -> None:
        """Read each queue's units up to ``max_offset`` (taken by the caller from the loop thread: every unit
        below it is completely written). Queues not seen before started after the baseline: read whole."""
        seen = set()
        for topic, qid, cq, max_offset in queues:
            key = (topic, qid)
            seen.add(key)
            start = self.cursor.get(key, 0)
            if start > max_offset:  # the queue was truncated or recreated
                start = 0
            if start < max_offset and budget > 0:
                try:
                    read = self._read(topic, cq, start, min(max_offset, start + budget))
                except (ValueError, IndexError, BufferError) as exc:  # a file retention just removed
                    log.debug("consume queue %s/%d unreadable at %d: %s", topic, qid, start, exc)
                    read = start  # tried again at the next scrape
                budget -= read - start
                start = read
            self.cursor[key] = start
        for key in [k for k in self.cursor if k not in seen]:  # deleted queues
            del self.cursor[key]

    def forget_topics(self, alive: set[str]) -> None:
        for topic in [t for t in self.topics if t not in alive]:
            del self.topics[topic]

    def _read(self, topic: str, cq: Any, start: int, stop: int) -> int:
        """Count units [start, stop); returns where it got to."""
        intake = self.topics.get(topic)
        if intake is None:
            intake = self.topics[topic] = TopicIntake()
        idx = start
        while idx < stop:
            view = cq.get_units(idx)
            if view is None:  # deleted by retention (or not readable): go on from the queue's minimum
                low = cq.get_min_offset_in_queue()
                if low <= idx:
                    break
                self.skipped += min(low, stop) - idx
                idx = min(low, stop)
                continue
            try:
                n = min(len(view) // CQ_UNIT_SIZE, stop - idx, _CHUNK_UNITS)
                if n <= 0:
                    break
                sizes = unit_sizes(view[: n * CQ_UNIT_SIZE])
            finally:
                view.release()
            _add(intake, sizes)
            idx += n
        return idx


def _add(intake: TopicIntake, sizes: array) -> None:
    blanks = sizes.count(BLANK_UNIT_SIZE)
    n = len(sizes) - blanks
    if n <= 0:
        return
    total = sum(sizes) - blanks * BLANK_UNIT_SIZE
    intake.messages += n
    intake.bytes += total
    buckets = intake.buckets
    if max(sizes) <= SIZE_BUCKETS[0] and not blanks:  # the common case: every message under 1 KiB
        buckets[0] += n
        return
    ordered = sorted(sizes)
    below = 0
    for i, bound in enumerate(SIZE_BUCKETS):
        upto = bisect_left(ordered, bound + 1)  # sizes <= bound
        buckets[i] += upto - below
        below = upto
    buckets[-1] += len(ordered) - blanks - below
