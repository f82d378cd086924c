"""CleanService rules on real files: deleteWhen, fileReservedTime, disk ratios, batch limit, active file,
derived files.

The store side here is a minimal file-backed stand-in for the StoreForCleanup protocol (segments are real
files);
test_faults_store.py runs the service against the real MessageStore.
"""

import os
import struct
import time
from types import SimpleNamespace

import pytest

from rocketq.store.cleanup import CleanService, disk_usage_ratio, parse_delete_when
from rocketq.store.index_file import IndexService

SEG = 1000
HOUR = 3_600_000


class FileStore:
    def __init__(self, root, n_segments, mtimes_ms):
        self.root = root
        self.cl = os.path.join(root, "commitlog")
        self.cq = os.path.join(root, "consumequeue", "T", "0")
        os.makedirs(self.cl)
        os.makedirs(self.cq)
        for i in range(n_segments):
            p = os.path.join(self.cl, f"{i * SEG:020d}")
            with open(p, "wb") as f:
                f.write(b"x" * SEG)
            os.utime(p, (mtimes_ms[i] / 1000, mtimes_ms[i] / 1000))
        # one CQ file per 2 segments, units pointing at 4 records per segment
        for j in range(0, n_segments, 2):
            with open(os.path.join(self.cq, f"{j * 4 * 20:020d}"), "wb") as f:
                for off in range(j * SEG, (j + 2) * SEG, SEG // 4):
                    f.write(struct.pack(">qiq", off, 250, 0))
        self.busy: set[str] = set()
        self.cq_min_offset = 0

    def commitlog_segments(self):
        names = sorted(os.listdir(self.cl))
        return [(os.path.join(self.cl, n), int(n)) for n in names]

    def delete_commitlog_segment(self, path):
        if path in self.busy:
            return False
        os.remove(path)
        return True

    @property
    def min_phy_offset(self):
        segs = self.commitlog_segments()
        return segs[0][1] if segs else 0

    def delete_expired_consume_queues(self, min_phy):
        n = 0
        names = sorted(os.listdir(self.cq))
        for name in names[:-1]:
            p = os.path.join(self.cq, name)
            with open(p, "rb") as f:
                data = f.read()
            last_phy = struct.unpack_from(">q", data, len(data) - 20)[0]
            if last_phy < min_phy:
                os.remove(p)
                n += 1
        # correct the min offset: first unit pointing at or beyond min_phy
        first = sorted(os.listdir(self.cq))[0]
        with open(os.path.join(self.cq, first), "rb") as f:
            data = f.read()
        for k in range(len(data) // 20):
            if struct.unpack_from(">q", data, k * 20)[0] >= min_phy:
                self.cq_min_offset = int(first) // 20 + k
                break
        return n


def local_ms(hour, day=15):
    return int(time.mktime((2026, 11, day, hour, 30, 0, 0, 0, -1)) * 1000)


def make(tmp_path, n=6, ages_h=(100, 90, 80, 10, 5, 1), now=None, ratio=0.3, **cfg):
    now = now or local_ms(4)
    store = FileStore(str(tmp_path), n, [now - a * HOUR for a in ages_h])
    config = SimpleNamespace(
        store_path_root_dir=str(tmp_path), delete_when="04", file_reserved_time=72, **cfg
    )
    usage = {"r": ratio}
    svc = CleanService(
        store, config, clock_ms=lambda: now, disk_usage=lambda p: usage["r"], sleep=lambda s: None
    )
    return store, svc, usage


def names(store):
    return [int(os.path.basename(p)) for p, _ in store.commitlog_segments()]


def test_parse_delete_when():
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("04;16") == {4, 16}
    with pytest.raises(ValueError):
        parse_delete_when("25")


def test_deletes_expired_only_at_delete_when_hour(tmp_path):
    store, svc, _ = make(tmp_path / "a", now=local_ms(10))
    assert svc.run_once() == 0  # 10:30 is not in deleteWhen=04
    assert names(store) == [0, 1000, 2000, 3000, 4000, 5000]
    store, svc, _ = make(tmp_path / "b", now=local_ms(4))
    assert svc.run_once() == 3  # the three older than 72 h
    assert names(store) == [3000, 4000, 5000]
    assert svc.run_once() == 0


def test_delete_when_list(tmp_path):
    _store, svc, _ = make(tmp_path, now=local_ms(16))
    svc.cfg.delete_when = "04;16"
    assert svc.run_once() == 3


def test_disk_over_max_ratio_deletes_expired_at_any_hour(tmp_path):
    _store, svc, _ = make(tmp_path, now=local_ms(11), ratio=0.80)
    assert svc.run_once() == 3
    assert not svc.disk_full


def test_forcible_clean_deletes_unexpired_but_never_the_active_file(tmp_path):
    store, svc, _usage = make(tmp_path, now=local_ms(11), ratio=0.87, delete_file_batch_max=10)
    assert svc.run_once() == 5
    assert names(store) == [5000]  # active segment stays
    assert not svc.disk_full


def test_batch_limit_per_pass(tmp_path):
    store, svc, _ = make(tmp_path, ages_h=(100,) * 6, delete_file_batch_max=2)
    assert svc.run_once() == 2
    assert svc.run_once() == 2
    assert svc.run_once() == 1
    assert names(store) == [5000]


def test_busy_segment_stops_the_pass_to_keep_the_log_contiguous(tmp_path):
    store, svc, _ = make(tmp_path)
    store.busy.add(store.commitlog_segments()[1][0])
    assert svc.run_once() == 1
    assert names(store) == [1000, 2000, 3000, 4000, 5000]


def test_disk_full_flag_set_and_cleared(tmp_path):
    _store, svc, usage = make(tmp_path, ages_h=(1,) * 6, now=local_ms(11), ratio=0.95)
    svc.cfg.clean_file_forcibly_enable = False
    svc.run_once()
    assert svc.disk_full  # warning level 90 % passed
    usage["r"] = 0.5
    svc.run_once()
    assert not svc.disk_full


def test_consume_queue_and_index_follow_min_offset(tmp_path):
    store, svc, _ = make(tmp_path)
    idx = IndexService(str(tmp_path), 8, 6)
    idx.load()
    for off in range(0, 6 * SEG, SEG // 4):
        idx.build_index("T", f"k{off}", None, off, local_ms(3))
    svc.index_service = idx
    n_idx = len(idx.files())
    svc.run_once()
    assert store.min_phy_offset == 3000
    assert sorted(os.listdir(store.cq)) == [f"{2 * 4 * 20:020d}", f"{4 * 4 * 20:020d}"]
    assert store.cq_min_offset == 12  # first unit pointing at offset 3000
    assert svc.stats.consume_queue_files_deleted == 1
    assert all(f.end_phy_offset >= 3000 for f in idx.files())
    assert len(idx.files()) < n_idx
    assert idx.query_offsets("T", "k3000", 4, 0, 2**62)[0] == [3000]
    idx.close()


def test_real_disk_usage_ratio(tmp_path):
    r = disk_usage_ratio(str(tmp_path))
    assert 0.0 < r < 1.0


def test_thread_start_and_shutdown(tmp_path):
    store, svc, _ = make(tmp_path)
    svc.check_interval_s = 0.01
    svc.start()
    deadline = time.monotonic() + 5
    while names(store)[0] != 3000 and time.monotonic() < deadline:
        time.sleep(0.01)
    svc.shutdown()
    assert names(store) == [3000, 4000, 5000]


def test_pause_between_deletions(tmp_path):
    _, svc, _ = make(tmp_path, delete_commit_log_files_interval=250)
    pauses = []
    svc._sleep = pauses.append
    assert svc.run_once() == 3
    assert pauses == [0.25, 0.25, 0.25]
