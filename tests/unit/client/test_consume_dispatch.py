"""Concurrent dispatch: ConsumeRequests served by at most consume_thread_max worker tasks."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from rocketq.client.consume import ConcurrentConsumeMixin
from rocketq.client.message import MessageQueue
from rocketq.client.process_queue import ProcessQueue


class _Stub(ConcurrentConsumeMixin):
    def __init__(self, threads: int, batch: int, delay: float | None) -> None:
        self.orderly = False
        self.consume_message_batch_max_size = batch
        self.consume_thread_max = threads
        self._running = True
        self._consume_requests: collections.deque[Any] = collections.deque()
        self._n_workers = 0
        self._helper_pending = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.delay = delay
        self.active = self.peak = 0
        self.seen: list[Any] = []

    def _spawn(self, coro: Any, background: bool = False) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _consume_concurrently(self, msgs: list[Any], pq: ProcessQueue, mq: MessageQueue) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)
        if self.delay is not None:
            await asyncio.sleep(self.delay)
        self.seen.extend(msgs)
        self.active -= 1


async def _run(stub: _Stub, n: int, spawned: list[int]) -> None:
    pq, mq = ProcessQueue(), MessageQueue("T", "b", 0)
    orig = stub._spawn

    def counting(coro: Any, background: bool = False) -> asyncio.Task[Any]:
        spawned[0] += 1
        return orig(coro, background)

    stub._spawn = counting  # type: ignore[method-assign]
    stub._dispatch(list(range(n)), pq, mq)  # type: ignore[arg-type]
    while stub._tasks:
        await asyncio.gather(*list(stub._tasks))


def test_slow_listener_runs_up_to_thread_max_concurrently() -> None:
    stub, spawned = _Stub(threads=5, batch=1, delay=0.01), [0]
    asyncio.run(_run(stub, 40, spawned))
    assert sorted(stub.seen) == list(range(40))
    assert stub.peak == 5 and stub._n_workers == 0


def test_fast_listener_needs_few_tasks_and_batches_are_split() -> None:
    stub, spawned = _Stub(threads=20, batch=1, delay=None), [0]
    asyncio.run(_run(stub, 32, spawned))
    assert stub.seen == list(range(32)) and spawned[0] <= 2  # was one Task per message
    stub, spawned = _Stub(threads=20, batch=8, delay=None), [0]
    asyncio.run(_run(stub, 20, spawned))
    assert stub.seen == list(range(20)) and stub._n_workers == 0


def test_stopped_consumer_leaves_requests_unserved() -> None:
    stub, spawned = _Stub(threads=3, batch=1, delay=0.01), [0]
    stub._running = False
    asyncio.run(_run(stub, 10, spawned))
    assert stub.seen == [] and stub._n_workers == 0
