"""Power-cut states of ConsumeQueue files that recovery must repair (not serve).

Under SYNC_FLUSH only the CommitLog is synced per ack; ConsumeQueue files are flushed lazily, so after a
power cut each CQ file holds any subset of its written pages (write-back order is arbitrary): an *older*
file can be torn while newer ones are complete. Recovery used to validate only the last three CQ files and
trust the rest, so zero units (physical offset 0, size 0) or garbage in an older file were served as queue
entries; a garbage first unit also made the CommitLog re-dispatch treat every record of the queue as "older
than the queue". Found by a stress harness (power-cut images with 16-unit CQ files).
"""

from __future__ import annotations

import os
import shutil
import struct

from store_helpers import msg, open_store

from rocketq.protocol.record import decode_record
from rocketq.store import GetMessageStatus

UNITS = 16  # units per CQ file: 80 messages make 5 files
CQ_BYTES = 20 * UNITS
N = 80
NO_DISK_GUARD = dict(disk_space_warning_level_ratio=101)  # the shared disk's fill level is not tested here


def _live_store(tmp_path):
    s = open_store(tmp_path / "live", mapped_file_size_consume_queue=CQ_BYTES, **NO_DISK_GUARD)
    s.records = []  # (phys, size) per queue offset
    for i in range(N):
        r = s.put_message(msg(queue_id=0, body=b"m%03d" % i + bytes(200)))
        assert r.queue_offset == i
        s.records.append((r.wrote_offset, r.wrote_bytes))
    return s


def _crash_image(s, dst):
    """kill -9 (abort file stays); the caller then damages CQ bytes that a power cut could have lost."""
    shutil.copytree(s.config.store_path_root_dir, dst, ignore=shutil.ignore_patterns("*.tmp"))
    s.shutdown()
    return dst


def _cq_file(root, index):
    return os.path.join(root, "consumequeue", "T", "0", f"{index * CQ_BYTES:020d}")


def _read_all(s):
    got, off = {}, s.get_min_offset_in_queue("T", 0)
    hi = s.get_max_offset_in_queue("T", 0)
    while off < hi:
        r = s.get_message("g", "T", 0, off, 32, None)
        assert r.status is GetMessageStatus.FOUND, (off, hi, r.status)
        for b in r.buffers:
            m = decode_record(b, verify_crc=True)
            got[m.queue_offset] = bytes(m.body)[:4]
        off = r.next_begin_offset
        r.release()
    return got


def _check(root, n=N):
    for i in range(2):  # and recovering again gives the same answer
        s = open_store(root, mapped_file_size_consume_queue=CQ_BYTES, **NO_DISK_GUARD)
        try:
            assert s.recovered_abnormally == (i == 0)
            got = _read_all(s)
            assert s.get_max_offset_in_queue("T", 0) == n
            assert got == {i: b"m%03d" % i for i in range(n)}
        finally:
            s.shutdown()


def test_torn_older_cq_file_and_torn_commitlog_leave_no_zero_units(tmp_path):
    """ASYNC power cut: CQ file 0 reached the disk only up to unit 10, files 1-4 completely; in the
    CommitLog a page inside record 6 never did (later pages did). The queue must end at offset 6 — before
    the fix the zero units 10-15 of file 0 survived (offset 0, size 0: NO_MATCHED_MESSAGE)."""
    s = _live_store(tmp_path)
    phys6, size6 = s.records[6]
    img = _crash_image(s, str(tmp_path / "img"))
    with open(_cq_file(img, 0), "r+b") as f:
        f.seek(10 * 20)
        f.write(bytes(CQ_BYTES - 10 * 20))
    with open(os.path.join(img, "commitlog", f"{0:020d}"), "r+b") as f:
        f.seek(phys6 + size6 - 64)  # inside record 6's body: its CRC fails, records 7+ stay intact
        f.write(b"\xff" * 16)
    _check(img, 6)


def test_garbage_first_unit_of_older_cq_file_is_rebuilt(tmp_path):
    img = _crash_image(_live_store(tmp_path), str(tmp_path / "img"))
    with open(_cq_file(img, 0), "r+b") as f:  # garbage sector at the start of file 0, rest never written
        f.write(struct.pack(">qiq", 3396603399465119078, 1358954496, 0) + bytes(CQ_BYTES - 20))
    _check(img)


def test_filler_up_to_a_file_boundary_puts_the_unit_into_the_next_file(tmp_path):
    """Re-dispatch may jump over missing units; a jump ending exactly at a CQ file boundary used to write the
    unit past the end of the full file (struct.error out of put, so out of recovery)."""
    from rocketq.store.consume_queue import BLANK_UNIT_SIZE, ConsumeQueue

    cq = ConsumeQueue("T", 0, str(tmp_path), 20 * 4)
    try:
        assert cq.put(0, 100, 0, 0)
        assert cq.put(1000, 100, 7, 4)  # units 1-3 become fillers, unit 4 opens file 1
        assert cq.get_max_offset_in_queue() == 5
        assert [cq.get_unit(i)[1] for i in range(1, 4)] == [BLANK_UNIT_SIZE] * 3
        assert cq.get_unit(4) == (1000, 100, 7)
        assert cq.put(1100, 100, 7, 5) and cq.get_unit(5) == (1100, 100, 7)
    finally:
        cq.shutdown()


def test_min_offset_does_not_jump_over_real_units_before_fillers(tmp_path):
    """correct_min_offset (every start, and retention) binary-searched with fillers counted as 'too old', so
    fillers in the middle of a queue (a hole padded on recovery) moved the minimum past real units."""
    from rocketq.store.consume_queue import ConsumeQueue

    cq = ConsumeQueue("T", 0, str(tmp_path / "a"), 20 * 8)
    try:
        phys = 0
        for q in [*range(5), *range(10, 30)]:  # offsets 5-9 become fillers; 4 files
            assert cq.put(phys, 100, 0, q)
            phys += 100
        cq.correct_min_offset(0)
        assert cq.get_min_offset_in_queue() == 0
        cq.correct_min_offset(300)  # retention: records below 300 are gone (offsets 0-2)
        assert cq.get_min_offset_in_queue() == 3
        cq.correct_min_offset(500)  # offsets 0-4 and the fillers: the minimum is the next real unit
        assert cq.get_min_offset_in_queue() == 10
    finally:
        cq.shutdown()
    cq = ConsumeQueue("T", 0, str(tmp_path / "b"), 20 * 8)
    try:  # a queue that starts at 20 (fillers 16-19 lead its first file) still skips them
        for i, q in enumerate(range(20, 30)):
            assert cq.put(1000 + 100 * i, 100, 0, q)
        cq.min_logic_offset = 16 * 20
        cq.correct_min_offset(0)
        assert cq.get_min_offset_in_queue() == 20
    finally:
        cq.shutdown()
