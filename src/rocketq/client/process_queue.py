"""ProcessQueue: the messages of one queue pulled but not yet consumed, and the offset math on them.

The committed offset of a queue is the smallest offset still being consumed, or (when nothing is in
flight) one past the largest offset ever pulled — so a crash never skips an unconsumed message.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable

from .message import MessageExt

PULL_MAX_IDLE_S = 120.0
REBALANCE_LOCK_MAX_LIVE_S = 30.0


class ProcessQueue:
    __slots__ = (
        "_consuming",
        "_heap",
        "_tree",
        "consume_lock_busy",
        "dropped",
        "last_consume_ts",
        "last_lock_ts",
        "last_pull_ts",
        "locked",
        "msg_count",
        "msg_size",
        "queue_offset_max",
        "try_unlock_times",
    )

    def __init__(self) -> None:
        self._tree: dict[int, MessageExt] = {}  # offset -> message, in flight
        self._heap: list[int] = []  # offsets of _tree, lazily pruned, for min()
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken but not committed
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.last_pull_ts = time.monotonic()
        self.last_consume_ts = time.monotonic()
        self.locked = False
        self.last_lock_ts = time.monotonic()
        self.consume_lock_busy = False
        self.try_unlock_times = 0

    def is_pull_expired(self) -> bool:
        return time.monotonic() - self.last_pull_ts > PULL_MAX_IDLE_S

    def is_lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_ts > REBALANCE_LOCK_MAX_LIVE_S

    def _min_offset(self) -> int:
        heap, tree = self._heap, self._tree
        while heap and heap[0] not in tree:
            heapq.heappop(heap)
        return heap[0]

    def put_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Add pulled messages; returns how many were new."""
        added = 0
        tree, heap = self._tree, self._heap
        for m in msgs:
            off = m.queue_offset
            if off in tree:
                continue
            tree[off] = m
            heapq.heappush(heap, off)
            added += 1
            self.msg_size += len(m.body)
            if off > self.queue_offset_max:
                self.queue_offset_max = off
        self.msg_count += added
        return added

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Remove consumed messages; returns the offset to commit, or -1 if nothing was in flight."""
        tree = self._tree
        if not tree:
            return -1
        for m in msgs:
            prev = tree.pop(m.queue_offset, None)
            if prev is not None:
                self.msg_count -= 1
                self.msg_size -= len(prev.body)
        self.last_consume_ts = time.monotonic()
        if tree:
            return self._min_offset()
        return self.queue_offset_max + 1

    def first_message(self) -> MessageExt | None:
        """The in-flight message with the smallest offset."""
        if not self._tree:
            return None
        return self._tree[self._min_offset()]

    def max_span(self) -> int:
        if not self._tree:
            return 0
        return self.queue_offset_max - self._min_offset()

    def has_temp_message(self) -> bool:
        return bool(self._tree)

    def clear(self) -> None:
        self._tree.clear()
        self._heap.clear()
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0

    # -- orderly consumption -------------------------------------------------------------------------
    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Take the ``batch_size`` smallest in-flight messages for orderly consumption."""
        out: list[MessageExt] = []
        tree, heap = self._tree, self._heap
        while len(out) < batch_size and tree:
            off = self._min_offset()
            heapq.heappop(heap)
            m = tree.pop(off)
            self._consuming[off] = m
            out.append(m)
        return out

    def commit(self) -> int:
        """Orderly: the taken messages were consumed; returns the offset to commit (-1 if none)."""
        if not self._consuming:
            return -1
        last = max(self._consuming)
        for m in self._consuming.values():
            self.msg_count -= 1
            self.msg_size -= len(m.body)
        self._consuming.clear()
        return last + 1

    def make_messages_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        for m in msgs:
            self._consuming.pop(m.queue_offset, None)
            self._tree[m.queue_offset] = m
            heapq.heappush(self._heap, m.queue_offset)
