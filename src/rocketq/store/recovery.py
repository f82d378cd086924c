"""Startup recovery of the CommitLog and ConsumeQueues.

Normal (no abort file: the last run shut down cleanly): scan the last three CommitLog segments for the end.
Abnormal (abort file present: crash or kill): start at the newest segment whose first record is older than the
checkpoint's minimum timestamp, verify every record (magic, size, position, body CRC), re-dispatch each into
the ConsumeQueues (units already present are skipped), and cut the log at the first invalid record.
Both end by dropping CQ units that point past the CommitLog end and rebuilding the topic-queue offset table.

A record that is whole (magic, size, position and lengths agree) but whose body fails its CRC, in data that
was flushed (all of it after a clean shutdown, below the checkpoint after a crash), is media corruption, not
a torn write: it is reported to on_corrupt and kept, and the log goes on past it (integrity.py); the read
paths never serve it. Cutting there would throw away every acknowledged message after it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

from rocketq.protocol.crc import crc32 as _crc32
from rocketq.protocol.record import FIXED_SIZE, MAGIC_CODE_V1, MAGIC_CODE_V2

from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .dispatch import END_OF_FILE, INVALID, DispatchRequest, read_dispatch_request

log = logging.getLogger(__name__)


CorruptBody = Callable[[int], None]  # called with the CommitLog offset of a whole record whose body fails CRC


def _scan(
    cl: CommitLog,
    start_index: int,
    check_crc: bool,
    delay_table: list[int],
    on_record: Callable[[DispatchRequest], bool] | None,
    start_pos: int = 0,
    on_corrupt: CorruptBody | None = None,
    flushed_below: int = 0,
) -> int:
    """Walk records from segment start_index (at start_pos, a record boundary); returns the CommitLog offset
    where valid data ends. on_record may reject a record (False): the log then ends before it. Below
    flushed_below, a whole record failing only its body CRC goes to on_corrupt and the walk goes on."""
    files = cl.mfq.files
    if not files:
        return 0
    end = files[start_index].file_from_offset + start_pos
    for i, mf in enumerate(files[start_index:]):
        pos = start_pos if i == 0 else 0
        base = mf.file_from_offset
        view = mf.view
        size_limit = mf.file_size
        while True:
            r = read_dispatch_request(view, pos, base + pos, check_crc, delay_table, size_limit)
            if check_crc and on_corrupt is not None and base + pos < flushed_below and r == INVALID:
                r = read_dispatch_request(view, pos, base + pos, False, delay_table, size_limit)
                if isinstance(r, DispatchRequest):  # whole, but its body fails the CRC
                    on_corrupt(base + pos)
            if isinstance(r, DispatchRequest):
                if on_record is not None and not on_record(r):
                    log.error("commitlog: record at %d disagrees with its consume queue", base + pos)
                    return end
                pos += r.msg_size
                mf.store_timestamp = r.store_timestamp
                end = base + pos
                continue
            if r == END_OF_FILE:
                end = base + size_limit  # the rest of this file is a blank record: go on with the next one
                pos = size_limit
            break
        if pos < size_limit:
            return end  # the log ends inside this file
    return end


RecordCheck = Callable[[str, int, int, int, int, int], bool]
_CHECK = struct.Struct(">iiiiiqq")  # size, magic, crc, qid, flag, qoff, phys


def _first_bad_record(
    mf, stop: int, check_crc: bool, verify: RecordCheck | None, on_corrupt: CorruptBody | None = None
) -> int | None:
    """Offset of the first record in mf before position stop that is not sane (magic, size, position, body
    CRC, and verify(topic, queue_id, queue_offset, phys, size, sys_flag) — the ConsumeQueue agrees), or None.
    Used where the records before stop were flushed and dispatched already: with on_corrupt, a body CRC
    mismatch is reported there and does not end the log."""
    view = mf.view
    base = mf.file_from_offset
    pos = 0
    unpack = _CHECK.unpack_from
    crc32 = _crc32
    while pos < stop:
        if stop - pos < FIXED_SIZE:
            return base + pos
        size, magic, crc, qid, _, qoff, phys = unpack(view, pos)
        if (magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2) or size < FIXED_SIZE or pos + size > stop:
            return base + pos
        if phys != base + pos:
            return base + pos
        sys_flag = int.from_bytes(view[pos + 36 : pos + 40], "big")
        p = pos + 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
        blen = int.from_bytes(view[p : p + 4], "big", signed=True)
        p += 4
        if blen < 0 or p + blen + 3 > pos + size:
            return base + pos
        if check_crc and (crc32(view[p : p + blen]) & 0x7FFFFFFF) != crc:
            if on_corrupt is None:
                return base + pos
            on_corrupt(base + pos)
        if verify is not None:
            p += blen
            if magic == MAGIC_CODE_V1:
                tlen, p = view[p], p + 1
            else:
                tlen, p = int.from_bytes(view[p : p + 2], "big", signed=True), p + 2
            try:
                topic = str(view[p : p + tlen], "utf-8")
            except UnicodeDecodeError:
                return base + pos
            if not verify(topic, qid, qoff, phys, size, sys_flag):
                log.error("commitlog: record at %d disagrees with its consume queue", phys)
                return base + pos
        pos += size
    return None


def _first_record_timestamp(cl: CommitLog, index: int, delay_table: list[int]) -> int | None:
    mf = cl.mfq.files[index]
    r = read_dispatch_request(mf.view, 0, mf.file_from_offset, False, delay_table, mf.file_size)
    return r.store_timestamp if isinstance(r, DispatchRequest) else None


def recover_commit_log(
    cl: CommitLog,
    checkpoint: StoreCheckpoint,
    abnormal: bool,
    check_crc: bool,
    delay_table: list[int],
    index_enabled: bool,
    on_record: Callable[[DispatchRequest], bool],
    full_scan: bool = False,
    resume_hint: int | None = None,
    verify: RecordCheck | None = None,
    on_corrupt: CorruptBody | None = None,
) -> int:
    """Find (and cut at) the end of valid data, re-dispatching records the ConsumeQueues lack; on abnormal
    recovery start from a safe point given by the checkpoint and always verify CRCs.
    Returns the new CommitLog end offset."""
    files = cl.mfq.files
    if not files:
        cl.mfq.flushed_where = 0
        return 0
    if not abnormal:
        # Clean shutdown: everything before the newest record a ConsumeQueue points at was flushed and
        # dispatched; scanning from there (RocketMQ scans the last three segments, which in Python would
        # cost seconds per GiB) finds the end and any records no queue holds (e.g. prepared transactions).
        start, start_pos = max(0, len(files) - 3), 0
        bad = None
        if resume_hint is not None:
            mf = cl.mfq.find_mapped_file_by_offset(resume_hint)
            if mf is not None:
                start, start_pos = files.index(mf), resume_hint - mf.file_from_offset
                # integrity of that segment up to the hint: a lean check (no decoding) of every record
                bad = _first_bad_record(mf, start_pos, check_crc, verify, on_corrupt)
        if bad is not None:
            log.error("commitlog: invalid record at %d", bad)
            end = bad
        else:  # a clean shutdown flushed everything
            end = _scan(cl, start, check_crc, delay_table, on_record, start_pos, on_corrupt, 1 << 62)
    else:
        at = None if full_scan or index_enabled else _checkpoint_start(cl, checkpoint, delay_table)
        # The part of that segment before the checkpoint offset gets the clean restart's lean check (CRC,
        # queue agreement), so the newest segment is still verified whole; any doubt there sends recovery
        # to the segment-wide scan, which re-dispatches what the queues lack and cuts where it must.
        if at is not None and _first_bad_record(files[at[0]], at[1], True, verify, on_corrupt) is not None:
            at = None
        if at is not None:
            start, start_pos = at
            log.warning(
                "abnormal recovery: scanning CommitLog from offset %d (checkpoint)",
                files[start].file_from_offset + start_pos,
            )
        else:
            min_ts = checkpoint.min_timestamp(index_enabled)
            start, start_pos = 0, 0
            for i in range(-1 if full_scan else len(files) - 1, -1, -1):
                ts = _first_record_timestamp(cl, i, delay_table)
                if ts is not None and ts <= min_ts:
                    start = i
                    break
            log.warning("abnormal recovery: scanning CommitLog from segment %s", files[start].file_name)
        # below the checkpoint everything was flushed: a bad body there is corruption, past it a torn write
        end = _scan(cl, start, True, delay_table, on_record, start_pos, on_corrupt, checkpoint.min_offset())
    # a clean log has nothing past its end; after a crash or a cut, stale bytes may follow it
    _cut(cl, end, zero_tail=abnormal or bad is not None or _nonzero_at(cl, end))
    return end


def _checkpoint_start(cl: CommitLog, checkpoint, delay_table: list[int]) -> tuple[int, int] | None:
    """(segment index, position) of the checkpoint's safe offset, if a valid record (or a segment's end)
    is there; None sends recovery back to the timestamps (an old checkpoint, or one it cannot trust)."""
    offset = checkpoint.min_offset()
    files = cl.mfq.files
    if offset <= 0 or not files or offset < files[0].file_from_offset:
        return None
    i = next((k for k, f in enumerate(files) if 0 <= offset - f.file_from_offset < f.file_size), None)
    if i is None:
        return None
    mf = files[i]
    pos = offset - mf.file_from_offset
    r = read_dispatch_request(mf.view, pos, offset, True, delay_table, mf.file_size)
    if isinstance(r, DispatchRequest) or r == END_OF_FILE:
        return i, pos
    if pos == 0 or not bytes(mf.view[pos : pos + 8]).strip(b"\0"):
        return i, pos  # nothing was appended after the checkpoint: the scan finds the end right there
    return None


def _nonzero_at(cl: CommitLog, offset: int) -> bool:
    """Do bytes follow the end (a record the scan rejected)? Cheap: looks at the next 8 bytes only."""
    mf = cl.mfq.find_mapped_file_by_offset(offset)
    if mf is None:
        return False
    pos = offset - mf.file_from_offset
    return bool(bytes(mf.view[pos : pos + 8]).strip(b"\0"))


def _cut(cl: CommitLog, end: int, zero_tail: bool) -> None:
    mfq = cl.mfq
    old_max = mfq.files[-1].file_from_offset + mfq.files[-1].wrote_position if mfq.files else 0
    mfq.truncate_dirty_files(end)
    last = mfq.last()
    if last is not None and zero_tail:
        pos = last.wrote_position
        if pos < last.file_size:
            # zero leftovers past the end so a later, shorter append can never be followed by stale records
            stop = last.last_nonzero_end(pos)
            if stop > pos:
                log.warning("commitlog: zeroing %d stale bytes after offset %d", stop - pos, end)
                last.zero_range(pos, stop)
    if old_max != end:
        log.info("commitlog end %d", end)
    mfq.flushed_where = end
    cl.reset_tail()
