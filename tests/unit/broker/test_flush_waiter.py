"""FlushWaiter: SYNC_FLUSH acknowledgements resolved on the loop, once per group-commit round (the store's
hand-off of rounds to the loop is tested in tests/unit/store/test_loop_flush.py)."""

from __future__ import annotations

import asyncio

from rocketq.broker.flush_waiter import FlushWaiter


def test_round_resolves_the_covered_prefix_in_order():
    async def go():
        w = FlushWaiter(asyncio.get_running_loop(), 5.0)
        got: list[tuple[int, bool]] = []
        for end in (100, 200, 300):
            w.add(end, lambda ok, end=end: got.append((end, ok)))
        w.advance(250)
        assert got == [(100, True), (200, True)]
        assert len(w) == 1
        w.advance(300)
        assert got[-1] == (300, True) and len(w) == 0
        w.add(150, lambda ok: got.append((150, ok)))  # already covered: answered at once
        assert got[-1] == (150, True)
        w.close()

    asyncio.run(go())


def test_uncovered_waiter_times_out_without_rounds():
    """A stalled disk: no round ever comes; the waiter still answers False after the timeout."""

    async def go():
        loop = asyncio.get_running_loop()
        w = FlushWaiter(loop, 0.05)
        futs = [loop.create_future() for _ in range(3)]
        for i, f in enumerate(futs):
            w.add(100 * (i + 1), f.set_result)
        t0 = loop.time()
        assert await asyncio.wait_for(asyncio.gather(*futs), 2) == [False, False, False]
        assert loop.time() - t0 >= 0.04
        assert len(w) == 0

    asyncio.run(go())


def test_round_times_out_expired_waiters_it_does_not_cover():
    async def go():
        loop = asyncio.get_running_loop()
        # No await before the first round: on a busy VM even a 5 ms sleep can overrun a short deadline.
        w = FlushWaiter(loop, 0.25)
        got: list[tuple[int, bool]] = []
        w.add(100, lambda ok: got.append((100, ok)))
        w.add(200, lambda ok: got.append((200, ok)))
        w.advance(100)
        assert got == [(100, True)]  # covered; 200 still within its deadline
        w._timer.cancel()  # only the round's own check may answer now
        await asyncio.sleep(0.3)
        assert got == [(100, True)]
        w.advance(150)
        assert got == [(100, True), (200, False)]

    asyncio.run(go())


def test_close_answers_false_after_the_loop_closed():
    loop = asyncio.new_event_loop()
    try:
        w = FlushWaiter(loop, 5.0)
        got: list[bool] = []
        w.add(10, got.append)
    finally:
        loop.close()
    w.close()
    assert got == [False]


def test_shorter_timeout_at_runtime_applies_to_waiters_and_to_the_armed_timer():
    """syncFlushTimeout lowered by UPDATE_BROKER_CONFIG: sends already waiting and new ones are answered by
    the new timeout, not by the timer armed for the old one; raising it leaves earlier deadlines alone."""

    async def go():
        loop = asyncio.get_running_loop()
        w = FlushWaiter(loop, 30.0)
        old = loop.create_future()
        w.add(100, old.set_result)  # arms the timer 30 s out
        w.set_timeout(0.05)
        new = loop.create_future()
        w.add(200, new.set_result)
        t0 = loop.time()
        assert await asyncio.wait_for(asyncio.gather(old, new), 2) == [False, False]
        assert loop.time() - t0 < 1.0
        # the other way: a longer timeout does not extend a deadline already given
        w.set_timeout(0.05)
        early = loop.create_future()
        w.add(300, early.set_result)
        w.set_timeout(30.0)
        late = loop.create_future()
        w.add(400, late.set_result)
        assert await asyncio.wait_for(early, 2) is False
        assert not late.done() and len(w) == 1
        w.advance(400)
        assert late.result() is True
        w.close()

    asyncio.run(go())


def test_shorter_timeout_keeps_the_queue_in_deadline_order():
    async def go():
        loop = asyncio.get_running_loop()
        w = FlushWaiter(loop, 30.0)
        for end in (100, 200):
            w.add(end, lambda ok: None)
        w.set_timeout(0.01)
        w.add(300, lambda ok: None)
        deadlines = [d for _, d, _ in w._q]
        assert deadlines == sorted(deadlines)
        assert deadlines[-1] - loop.time() <= 0.01
        w.close()

    asyncio.run(go())
