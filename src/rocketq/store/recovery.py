"""Startup recovery of the CommitLog and ConsumeQueues.

Normal (no abort file: the last run shut down cleanly): scan the last three CommitLog segments for the end.
Abnormal (abort file present: crash or kill): start at the newest segment whose first record is older than the
checkpoint's minimum timestamp, verify every record (magic, size, position, body CRC), re-dispatch each into
the ConsumeQueues (units already present are skipped), and cut the log at the first invalid record.
Both end by dropping CQ units that point past the CommitLog end and rebuilding the topic-queue offset table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .dispatch import END_OF_FILE, DispatchRequest, read_dispatch_request

log = logging.getLogger(__name__)


def _scan(
    cl: CommitLog,
    start_index: int,
    check_crc: bool,
    delay_table: list[int],
    on_record: Callable[[DispatchRequest], bool] | None,
) -> int:
    """Walk records from segment start_index; returns the CommitLog offset where valid data ends.
    on_record may reject a record (False): the log then ends before it."""
    files = cl.mfq.files
    if not files:
        return 0
    end = files[start_index].file_from_offset
    for mf in files[start_index:]:
        pos = 0
        base = mf.file_from_offset
        view = mf.view
        size_limit = mf.file_size
        while True:
            r = read_dispatch_request(view, pos, base + pos, check_crc, delay_table, size_limit)
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
) -> int:
    """Find (and cut at) the end of valid data, re-dispatching records the ConsumeQueues lack; on abnormal
    recovery start from a safe point given by the checkpoint and always verify CRCs.
    Returns the new CommitLog end offset."""
    files = cl.mfq.files
    if not files:
        cl.mfq.flushed_where = 0
        return 0
    if not abnormal:
        start = max(0, len(files) - 3)
        end = _scan(cl, start, check_crc, delay_table, on_record)
    else:
        min_ts = checkpoint.min_timestamp(index_enabled)
        start = 0
        for i in range(-1 if full_scan else len(files) - 1, -1, -1):
            ts = _first_record_timestamp(cl, i, delay_table)
            if ts is not None and ts <= min_ts:
                start = i
                break
        log.warning("abnormal recovery: scanning CommitLog from segment %s", files[start].file_name)
        end = _scan(cl, start, True, delay_table, on_record)
    _cut(cl, end)
    return end


def _cut(cl: CommitLog, end: int) -> None:
    mfq = cl.mfq
    old_max = mfq.files[-1].file_from_offset + mfq.files[-1].wrote_position if mfq.files else 0
    mfq.truncate_dirty_files(end)
    last = mfq.last()
    if last is not None:
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
