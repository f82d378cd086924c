"""SYNC_MASTER's grouped waits (ha/waiter.py): one report releases every send it covers, in order."""

from __future__ import annotations

import asyncio

from rocketq.ha.waiter import ReplicaWaiter


def test_one_ack_releases_every_send_it_covers_and_no_more():
    async def go():
        w = ReplicaWaiter(asyncio.get_running_loop(), 5.0)
        done: list[tuple[int, bool]] = []
        for end in (100, 200, 300, 400):
            w.add(end, 1, [0], lambda ok, end=end: done.append((end, ok)))
        assert done == [] and len(w) == 4
        w.advance([250])
        assert done == [(100, True), (200, True)] and len(w) == 2
        w.advance([250, 1000])  # a second slave far ahead
        assert done[2:] == [(300, True), (400, True)] and len(w) == 0
        w.add(50, 1, [1000], lambda ok: done.append((50, ok)))  # already covered: answered at once
        assert done[-1] == (50, True)
        assert w.released == 5

    asyncio.run(go())


def test_two_slaves_needed():
    async def go():
        w = ReplicaWaiter(asyncio.get_running_loop(), 5.0)
        done: list[int] = []
        w.add(100, 2, [0, 0], lambda ok: done.append(100))
        w.add(200, 2, [0, 0], lambda ok: done.append(200))
        w.advance([500, 0])
        assert done == []
        w.advance([500, 150])
        assert done == [100]
        w.advance([500, 200])
        assert done == [100, 200]

    asyncio.run(go())


def test_timeout_answers_false_even_without_reports():
    async def go():
        loop = asyncio.get_running_loop()
        w = ReplicaWaiter(loop, 0.2)
        done: list[bool] = []
        w.add(100, 1, [0], done.append)
        t0 = loop.time()
        while not done and loop.time() - t0 < 5:
            await asyncio.sleep(0.02)
        assert done == [False] and w.timed_out == 1
        w.add(100, 1, [0], done.append)
        w.close()
        assert done == [False, False]

    asyncio.run(go())
