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
