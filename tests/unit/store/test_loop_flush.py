"""SYNC_FLUSH group commit driven by an asyncio loop with native AIO fdatasync (store/loop_flush.py,
store/linux_aio.py), on real files: what a round covers, grouping, appends from other threads, segment
rolls, failures, shutdown, and the thread fallback."""

from __future__ import annotations

import asyncio
import os
import select
import threading

import pytest
from store_helpers import HOST, config, msg
from store_helpers import open_store as _open

from rocketq.store import FlushDiskType, MessageStore, PutMessageStatus, linux_aio, loop_flush
from rocketq.store.linux_aio import FdsyncContext


def _store(root, listener, loop, **kw) -> MessageStore:
    s = MessageStore(config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH, **kw), HOST)
    assert s.set_loop_flush_listener(loop, listener)
    s.start()
    return s


async def _until(pred, timeout=5.0) -> None:
    end = asyncio.get_running_loop().time() + timeout
    while not pred():
        assert asyncio.get_running_loop().time() < end, "timed out"
        await asyncio.sleep(0.005)


# -- linux_aio ---------------------------------------------------------------------------------------------
def test_fdsync_completes_on_the_eventfd_with_its_tag(tmp_path):
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    ctx = FdsyncContext(2)
    try:
        os.write(fd, b"x" * 4096)
        assert ctx.reap(0.0) == []  # nothing submitted, nothing done
        ctx.submit([fd], 7)
        assert ctx.in_flight == 1
        r, _, _ = select.select([ctx.eventfd], [], [], 5.0)
        assert r == [ctx.eventfd]
        ctx.clear_eventfd()
        assert ctx.reap(0.0) == [(7, 0)]
        assert ctx.in_flight == 0
        with pytest.raises(OSError):  # more than its slots in flight is refused before the kernel sees it
            ctx.submit([fd, fd, fd], 1)
        assert ctx.in_flight == 0
    finally:
        ctx.close()
        os.close(fd)
    with pytest.raises(OSError):
        os.fstat(ctx.eventfd)  # closed with the context


def _wait_reap(ctx: FdsyncContext, n: int) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    while len(got) < n:
        r, _, _ = select.select([ctx.eventfd], [], [], 5.0)
        assert r, "no completion within 5 s"
        ctx.clear_eventfd()
        got += ctx.reap(0.0)
    return got


@pytest.mark.skipif(linux_aio.platform.machine() not in linux_aio._RING_ARCHES, reason="ring read on x86-64")
def test_completions_read_from_the_ring_wrap_around_it_and_leave_the_kernel_in_step(tmp_path):
    fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(3)]
    ctx = FdsyncContext(4)
    try:
        assert ctx._ring is not None and ctx._ring_nr >= 4
        for i in range(3 * ctx._ring_nr + 5):  # wraps the ring three times
            batch = fds[: 1 + i % 3]
            for fd in batch:
                os.pwrite(fd, b"x" * 100, i * 100)
            ctx.submit(batch, i)
            assert sorted(_wait_reap(ctx, len(batch))) == [(i, 0)] * len(batch)
            assert ctx.in_flight == 0
        # the kernel's own reading of the ring (io_getevents) agrees with where we left head
        ctx.submit([fds[0]], 99)
        assert select.select([ctx.eventfd], [], [], 5.0)[0]
        assert ctx.reap(5.0) == [(99, 0)]
        assert ctx.reap(0.0) == []
    finally:
        ctx.close()
        for fd in fds:
            os.close(fd)


def test_probe_accepts_a_file_and_names_what_is_refused(tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    r, w = os.pipe()
    try:
        assert linux_aio.probe(fd) is None
        why = linux_aio.probe(r)  # a pipe has no fsync: the kernel refuses the iocb
        assert why is not None and "Invalid argument" in why
    finally:
        for x in (fd, r, w):
            os.close(x)


# -- LoopGroupCommit ---------------------------------------------------------------------------------------
def test_rounds_cover_each_append_and_report_on_the_loop_thread(tmp_path):
    async def go():
        loop = asyncio.get_running_loop()
        seen: list[tuple[int, int]] = []
        s = _store(tmp_path, lambda off: seen.append((off, threading.get_ident())), loop)
        try:
            assert s.flush_backend == "native-aio"
            assert s.runtime_info()["groupCommitBackend"] == "native-aio"
            ends = []
            for i in range(5):
                r = s.put_message(msg(body=b"m%d" % i))
                assert r.status == PutMessageStatus.PUT_OK and r.flush_future is None
                ends.append(r.flush_offset)
                await _until(lambda e=r.flush_offset: seen and seen[-1][0] >= e)
            assert ends == sorted(ends) and s.flushed_phy_offset == ends[-1] == s.max_phy_offset
            assert {tid for _, tid in seen} == {threading.get_ident()}
            assert s.flush_service.sync_count == 5  # one round each: every append waited for the last
            assert s.checkpoint.physic_offset == ends[-1]
        finally:
            s.shutdown()

    asyncio.run(go())


def test_an_idle_store_starts_a_round_at_once_and_appends_meanwhile_share_the_next(tmp_path):
    async def go():
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        s = _store(tmp_path, seen.append, loop)
        try:
            await _until(lambda: s.flush_service._loop_thread)  # attached
            first = s.put_message(msg())
            # the round started inside the put, before the loop got back control
            rnd = s.flush_service._round
            assert rnd is not None and rnd.target == first.flush_offset
            for _ in range(29):  # made while that round is in flight (it completes on this loop only)
                r = s.put_message(msg())
            assert s.flush_service._round is rnd
            await _until(lambda: seen and seen[-1] >= r.flush_offset)
            assert s.flush_service.sync_count == 2  # the first alone, then the other 29 together
            assert first.flush_offset in seen

            s.hold_flush_wakeups()
            for _ in range(10):
                r = s.put_message(msg(body=b"held"))
            await asyncio.sleep(0.05)  # held: no round asked for yet, however long the run takes
            assert s.flush_service.sync_count == 2 and seen[-1] < r.flush_offset
            assert s.release_flush_wakeups()
            await _until(lambda: seen[-1] >= r.flush_offset)
            assert s.flush_service.sync_count == 3
        finally:
            s.shutdown()

    asyncio.run(go())


def test_appends_from_another_thread_and_across_segment_rolls(tmp_path):
    async def go():
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        s = _store(tmp_path, seen.append, loop)  # 64 KiB segments
        try:
            ends: list[int] = []

            def writer():
                for _ in range(40):
                    ends.append(s.put_message(msg(body=b"y" * 5000)).flush_offset)

            t = threading.Thread(target=writer)
            t.start()
            await asyncio.to_thread(t.join)
            assert len(s.commit_log.mfq.files) >= 3
            await _until(lambda: seen and seen[-1] >= ends[-1])
            # a round that spans a roll syncs every segment it covers
            files = s.commit_log.mfq.files
            assert all(mf.flushed_position == mf.wrote_position for mf in files)
            assert s.flushed_phy_offset == s.max_phy_offset
        finally:
            s.shutdown()

    asyncio.run(go())


def test_more_unflushed_segments_than_slots_take_more_rounds(tmp_path, monkeypatch):
    monkeypatch.setattr(loop_flush, "AIO_SLOTS", 2)

    async def go():
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        s = _store(tmp_path, seen.append, loop)  # 64 KiB segments
        try:
            await _until(lambda: s.flush_service._loop_thread)
            assert s.flush_service._ctx.slots == 2
            before = s.flush_service.sync_count
            for _ in range(60):  # one callback: one round wanted, over 5 segments
                r = s.put_message(msg(body=b"z" * 5000))
            assert len(s.commit_log.mfq.files) >= 5
            await _until(lambda: seen and seen[-1] >= r.flush_offset)
            assert s.flush_service.sync_count - before >= 3  # 2 segments a round at most
            assert all(mf.flushed_position == mf.wrote_position for mf in s.commit_log.mfq.files)
        finally:
            s.shutdown()

    asyncio.run(go())


def test_a_refused_submission_acknowledges_nothing_and_is_retried(tmp_path, monkeypatch):
    async def go():
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        s = _store(tmp_path, seen.append, loop)
        real = FdsyncContext.submit
        refused = []

        def refuse(self, fds, tag):
            refused.append(fds)
            raise OSError(11, "EAGAIN")

        try:
            await _until(lambda: s.flush_service._loop_thread)
            monkeypatch.setattr(FdsyncContext, "submit", refuse)
            r = s.put_message(msg())
            await _until(lambda: len(refused) >= 2)  # retried after RETRY_AFTER_FAILURE_S
            assert not seen or seen[-1] < r.flush_offset
            assert s.flush_service.failed_rounds >= 2 and s.flushed_phy_offset < r.flush_offset
            monkeypatch.setattr(FdsyncContext, "submit", real)
            await _until(lambda: seen and seen[-1] >= r.flush_offset)
        finally:
            s.shutdown()

    asyncio.run(go())


def test_shutdown_from_another_thread_flushes_everything_and_detaches(tmp_path):
    async def go():
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        s = _store(tmp_path, seen.append, loop)
        await _until(lambda: s.flush_service._loop_thread)
        ctx = s.flush_service._ctx
        for _ in range(20):
            r = s.put_message(msg())
        await asyncio.to_thread(s.shutdown)  # the broker's way: the loop runs on meanwhile
        await _until(lambda: seen and seen[-1] >= r.flush_offset)
        await _until(lambda: not ctx._ctx)  # detached on the loop: context destroyed, eventfd closed
        with pytest.raises(OSError):
            os.fstat(ctx.eventfd)

    asyncio.run(go())
    s2 = _open(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)  # clean shutdown: recovers it all
    try:
        assert s2.get_max_offset_in_queue("T", 0) == 20
    finally:
        s2.shutdown()


def test_without_native_aio_the_thread_reports_rounds_on_the_loop(tmp_path):
    stores: list[MessageStore] = []

    async def go():
        loop = asyncio.get_running_loop()
        seen: list[tuple[int, int]] = []
        s = _store(tmp_path, lambda off: seen.append((off, threading.get_ident())), loop,
                   sync_flush_native_aio=False)  # fmt: skip
        stores.append(s)
        assert s.flush_backend == "thread"
        r = s.put_message(msg())
        await _until(lambda: seen and seen[-1][0] >= r.flush_offset)
        assert {tid for _, tid in seen} == {threading.get_ident()}

    try:
        asyncio.run(go())
    finally:
        for s in stores:
            s.shutdown()  # its final round finds the loop closed: dropped, not raised
