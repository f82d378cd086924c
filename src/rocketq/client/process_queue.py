"""ProcessQueue: the messages of one queue pulled but not yet consumed, and the offset math on them.

The committed offset of a queue is the smallest offset still being consumed, or (when nothing is in
flight) one past the largest offset ever pulled — so a crash never skips an unconsumed message.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Iterable

from .message import MessageExt

PULL_MAX_IDLE_S = 120.0
REBALANCE_LOCK_MAX_LIVE_S = 30.0


class ProcessQueue:
    __slots__ = (
        "_consuming",
        "_heap",
        "_order",
        "_order_last",
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
        # Offsets of _tree for min(), both lazily pruned: pulls arrive in increasing offset order, so almost
        # every offset is appended to _order (O(1) in and out); the rest (put back, or older than the
        # newest pulled) go to the heap.
        self._order: deque[int] = deque()
        self._order_last = -1
        self._heap: list[int] = []
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
        """Smallest offset in _tree (which is not empty)."""
        tree, order, heap = self._tree, self._order, self._heap
        while order and order[0] not in tree:
            order.popleft()
        while heap and heap[0] not in tree:
            heapq.heappop(heap)
        if heap and (not order or heap[0] < order[0]):
            return heap[0]
        return order[0]

    def _index(self, off: int) -> None:
        if off > self._order_last:
            self._order.append(off)
            self._order_last = off
        else:
            heapq.heappush(self._heap, off)

    def put_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Add pulled messages; returns how many were new."""
        added = size = 0
        tree, order = self._tree, self._order
        last = self._order_last
        for m in msgs:
            off = m.queue_offset
            if off in tree:
                continue
            tree[off] = m
            if off > last:
                order.append(off)
                last = off
            else:
                heapq.heappush(self._heap, off)
            added += 1
            size += len(m.body)
        self._order_last = last
        if last > self.queue_offset_max:
            self.queue_offset_max = last
        self.msg_size += size
        self.msg_count += added
        return added

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Remove consumed messages; returns the offset to commit, or -1 if nothing was in flight."""
        tree = self._tree
        if not tree:
            return -1
        count = size = 0
        pop = tree.pop
        for m in msgs:
            prev = pop(m.queue_offset, None)
            if prev is not None:
                count += 1
                size += len(prev.body)
        self.msg_count -= count
        self.msg_size -= size
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
        self._order.clear()
        self._order_last = -1
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0

    # -- orderly consumption -------------------------------------------------------------------------
    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Take the ``batch_size`` smallest in-flight messages for orderly consumption."""
        out: list[MessageExt] = []
        tree = self._tree
        while len(out) < batch_size and tree:
            m = tree.pop(self._min_offset())  # its index entry goes stale and is pruned later
            off = m.queue_offset
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
            self._index(m.queue_offset)
