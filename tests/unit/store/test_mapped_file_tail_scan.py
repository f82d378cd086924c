"""After a crash, recovery zeroes stale bytes past the CommitLog's end. Finding them reads only the segment's
data ranges (lseek SEEK_DATA / SEEK_HOLE), not the unwritten preallocation: these tests check the answer is
the same as reading every byte, wherever the stale bytes are."""

from __future__ import annotations

import errno
import os
import random
import shutil

import pytest
from store_helpers import msg, open_store

from rocketq.store.mapped_file import MappedFile

SEG = 4 << 20


def brute_last_nonzero_end(mf: MappedFile, start: int) -> int:
    tail = bytes(mf.mm[start:]).rstrip(b"\0")
    return start + len(tail)


def fs_reports_holes(directory) -> bool:
    """Does this filesystem tell holes from data? (Otherwise the whole rest of a file is one range.)"""
    path = os.path.join(directory, "probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, 1 << 20)
        os.pwrite(fd, b"x", 0)
        try:
            return os.lseek(fd, 0, os.SEEK_HOLE) < (1 << 20)
        except OSError:
            return False
    finally:
        os.close(fd)
        os.unlink(path)


@pytest.mark.parametrize("preallocate", [True, False])
def test_last_nonzero_end_matches_a_full_read(tmp_path, preallocate):
    mf = MappedFile(str(tmp_path / f"{0:020d}"), SEG, preallocate=preallocate)
    try:
        rng = random.Random(7)
        assert mf.last_nonzero_end(0) == 0
        for _ in range(12):
            at = rng.randrange(SEG - 64)
            data = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 64)))
            if rng.random() < 0.5:
                mf.mm[at : at + len(data)] = data  # through the map, like ASYNC_FLUSH
            else:
                os.pwrite(mf.fd, data, at)  # through the file, like SYNC_FLUSH
            for start in (0, at, at + len(data), rng.randrange(SEG), SEG - 1, SEG):
                assert mf.last_nonzero_end(start) == brute_last_nonzero_end(mf, start), (at, start)
    finally:
        mf.destroy()


def test_ranges_skip_the_unwritten_preallocation(tmp_path):
    if not fs_reports_holes(tmp_path):
        pytest.skip("this filesystem reports no holes: the scan reads the whole rest, as before")
    mf = MappedFile(str(tmp_path / f"{0:020d}"), SEG, preallocate=True)
    try:
        os.pwrite(mf.fd, b"r" * 300, 0)
        os.pwrite(mf.fd, b"stale", SEG - 1000)
        ranges = mf.data_ranges(300)
        assert sum(hi - lo for lo, hi in ranges) < SEG // 2
        assert any(lo <= SEG - 1000 < hi for lo, hi in ranges)
        assert mf.last_nonzero_end(300) == SEG - 995
    finally:
        mf.destroy()


def test_without_seek_data_the_whole_rest_is_scanned(tmp_path, monkeypatch):
    mf = MappedFile(str(tmp_path / f"{0:020d}"), SEG, preallocate=True)
    try:
        mf.mm[SEG - 10 : SEG - 7] = b"abc"
        real = os.lseek

        def no_seek_data(fd, pos, how):
            if how in (os.SEEK_DATA, os.SEEK_HOLE):
                raise OSError(errno.EINVAL, "not supported")
            return real(fd, pos, how)

        monkeypatch.setattr(os, "lseek", no_seek_data)
        assert mf.data_ranges(100) == [(100, SEG)]
        assert mf.last_nonzero_end(100) == SEG - 7
    finally:
        mf.destroy()


def test_abnormal_restart_zeroes_stale_bytes_far_past_the_end(tmp_path):
    """A kill -9 image whose last segment has stale bytes megabytes past the end, behind unwritten blocks:
    recovery keeps every message and zeroes them, so a later append can never run into them."""
    s = open_store(tmp_path / "live", mapped_file_size_commitlog=SEG)
    try:
        rs = [s.put_message(msg(queue_id=i % 2, body=b"m%d" % i)) for i in range(50)]
        img = tmp_path / "img"
        shutil.copytree(s.config.store_path_root_dir, img, ignore=shutil.ignore_patterns("*.tmp"))
    finally:
        s.shutdown()
    end = rs[-1].wrote_offset + rs[-1].wrote_bytes
    path = img / "commitlog" / f"{0:020d}"
    with open(path, "r+b") as f:  # rebuild the copy sparse, as the live segment was: data, then a hole
        head = f.read(end)
        f.truncate(0)
        f.truncate(SEG)
        f.seek(0)
        f.write(head)
        f.seek(3 << 20)
        f.write(b"\xee" * 5000)  # a record written before the crash that the scan cannot reach
    s = open_store(img, mapped_file_size_commitlog=SEG)
    try:
        assert s.recovered_abnormally
        assert s.max_phy_offset == end
        with open(path, "rb") as f:
            f.seek(end)
            assert not f.read().strip(b"\0")
        r = s.put_message(msg(queue_id=0, body=b"after"))
        assert r.wrote_offset == end
    finally:
        s.shutdown()
