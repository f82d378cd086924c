"""Abnormal recovery starts at the CommitLog offset the checkpoint vouches for (flushed CommitLog and
ConsumeQueues), not a whole segment before a timestamp; an untrustworthy offset falls back to the scan."""

from __future__ import annotations

import logging
import shutil
import struct

from store_helpers import msg, open_store

from rocketq.protocol.record import decode_record
from rocketq.store import GetMessageStatus

BODY = bytes(3000)  # several records per 64 KiB test segment, several segments


def read_all(s, qid):
    out, off = [], s.get_min_offset_in_queue("T", qid)
    while True:
        r = s.get_message("g", "T", qid, off, 32, None)
        if r.status is not GetMessageStatus.FOUND:
            return out
        for b in r.buffers:
            m = decode_record(b, verify_crc=True)
            out.append((m.queue_offset, bytes(m.body)))
        off = r.next_begin_offset
        r.release()


def checkpointed_crash(tmp_path, after: int = 12):
    """Records in 2 queues, a checkpoint round (CommitLog and queues flushed), more records, then the
    files as a kill -9 leaves them. Returns (image dir, records, checkpoint offset)."""
    s = open_store(tmp_path / "live")
    try:
        rs = [s.put_message(msg(queue_id=i % 2, body=b"m%d|" % i + BODY)) for i in range(60)]
        s.flush_service.flush_once(0)
        s.cq_flush_service.flush_once(True)
        mark = s.checkpoint.min_offset()
        rs += [s.put_message(msg(queue_id=i % 2, body=b"m%d|" % i + BODY)) for i in range(60, 60 + after)]
        img = tmp_path / "img"
        shutil.copytree(s.config.store_path_root_dir, img, ignore=shutil.ignore_patterns("*.tmp"))
    finally:
        s.shutdown()
    return img, rs, mark


def want(rs, q):
    return [(r.queue_offset, b"m%d|" % i + BODY) for i, r in enumerate(rs) if i % 2 == q]


def test_checkpoint_offsets_are_the_flushed_ends(tmp_path):
    img, rs, mark = checkpointed_crash(tmp_path)
    assert mark == rs[59].wrote_offset + rs[59].wrote_bytes  # both flushes covered the first 60 records
    raw = (img / "checkpoint").read_bytes()
    assert struct.unpack(">qq", raw[64:80]) == (mark, mark)


def test_abnormal_restart_scans_from_the_checkpoint_offset(tmp_path, caplog):
    img, rs, mark = checkpointed_crash(tmp_path)
    assert len(list((img / "commitlog").iterdir())) >= 3 and mark % (64 * 1024) != 0
    with caplog.at_level(logging.WARNING, logger="rocketq.store.recovery"):
        s = open_store(img)
    try:
        assert s.recovered_abnormally
        assert f"scanning CommitLog from offset {mark} (checkpoint)" in caplog.text
        assert s.max_phy_offset == rs[-1].wrote_offset + rs[-1].wrote_bytes
        for q in range(2):
            assert read_all(s, q) == want(rs, q)
    finally:
        s.shutdown()


def test_records_after_the_checkpoint_are_still_verified_and_redispatched(tmp_path):
    img, rs, mark = checkpointed_crash(tmp_path)
    seg = 64 * 1024
    last = rs[-1]
    path = img / "commitlog" / f"{last.wrote_offset - last.wrote_offset % seg:020d}"
    assert last.wrote_offset > mark
    with open(path, "r+b") as f:  # torn: the last record's body never made it
        f.seek(last.wrote_offset % seg + 200)
        f.write(b"\xff" * 64)
    cq = img / "consumequeue" / "T" / "0" / "00000000000000000000"
    with open(cq, "r+b") as f:  # and queue 0's units after the checkpoint were lost
        f.seek(30 * 20)
        f.write(bytes(20 * 20))
    s = open_store(img)
    try:
        assert s.max_phy_offset == last.wrote_offset
        for q in range(2):
            assert read_all(s, q) == want(rs[:-1], q)
    finally:
        s.shutdown()


def test_bad_offsets_fall_back_to_the_segment_scan(tmp_path, caplog):
    img, rs, mark = checkpointed_crash(tmp_path)
    with open(img / "checkpoint", "r+b") as f:  # not a record boundary, CRC recomputed: looks valid
        import zlib

        off = struct.pack(">qq", mark + 7, mark + 7)
        f.seek(64)
        f.write(off + struct.pack(">I", zlib.crc32(off)))
    with caplog.at_level(logging.WARNING, logger="rocketq.store.recovery"):
        s = open_store(img)
    try:
        assert "(checkpoint)" not in caplog.text and "scanning CommitLog from segment" in caplog.text
        for q in range(2):
            assert read_all(s, q) == want(rs, q)
    finally:
        s.shutdown()
    caplog.clear()
    img2, rs2, _ = checkpointed_crash(tmp_path / "b")
    with open(img2 / "checkpoint", "r+b") as f:  # torn: the CRC does not match
        f.seek(70)
        f.write(b"\x01")
    with caplog.at_level(logging.WARNING, logger="rocketq.store.recovery"):
        s = open_store(img2)
    try:
        assert s.checkpoint.min_offset() == 0
        assert "scanning CommitLog from segment" in caplog.text
        for q in range(2):
            assert read_all(s, q) == want(rs2, q)
    finally:
        s.shutdown()


def test_logics_offset_advances_without_a_thorough_flush(tmp_path):
    s = open_store(tmp_path / "s")
    try:
        # queue 1 gets one record early and no more: its single unit stays below least pages (2), unflushed;
        # queue 0's 410 units (8,200 bytes) are over it and get flushed whole
        rs = [s.put_message(msg(queue_id=0, body=b"m%d|" % i + BODY)) for i in range(10)]
        first = s.put_message(msg(queue_id=1, body=b"early|" + BODY))
        rs += [s.put_message(msg(queue_id=0, body=b"m%d|" % i + BODY)) for i in range(400)]
        assert first.wrote_offset > 0
        s.cq_flush_service.flush_once(False)
        assert s.checkpoint.logics_msg_timestamp == 0  # the timestamp waits for a thorough flush
        assert s.checkpoint.logics_offset == first.wrote_offset  # held back by queue 1's unflushed unit
        s.cq_flush_service.flush_once(True)
        assert s.checkpoint.logics_offset == rs[-1].wrote_offset + rs[-1].wrote_bytes
    finally:
        s.shutdown()
