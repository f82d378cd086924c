"""StoreCheckpoint: <root>/checkpoint, RocketMQ's layout — a 4 KiB file whose first 24 bytes are three
big-endian int64 timestamps (ms): physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp. Each is the
store timestamp of the newest record known durable in the CommitLog / ConsumeQueues / IndexFiles;
abnormal recovery starts scanning at the CommitLog segment that begins before their minimum.

rocketq adds, at byte 64, the CommitLog offsets those first two timestamps stand for (flushed CommitLog end,
and the offset below which every ConsumeQueue unit is durable) with a CRC: abnormal recovery then starts at
the lower offset, a record boundary, instead of a whole segment (up to 1 GiB) before a timestamp. The bytes
RocketMQ 5 uses after the timestamps (24..40) stay zero."""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import zlib

from . import faultfs

log = logging.getLogger(__name__)

CHECKPOINT_FILE_SIZE = 4096
_LAYOUT = struct.Struct(">qqq")
_OFFSETS_AT = 64
_OFFSETS = struct.Struct(">qqI")  # physic offset, logics offset, crc32 of the 16 bytes before it


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.physic_offset = 0  # CommitLog flushed up to here when physic_msg_timestamp was taken
        self.logics_offset = 0  # every ConsumeQueue unit of a record below here was durable
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        created = not os.path.exists(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size < CHECKPOINT_FILE_SIZE:
            os.ftruncate(self._fd, CHECKPOINT_FILE_SIZE)
        raw = os.pread(self._fd, _LAYOUT.size, 0)
        if len(raw) == _LAYOUT.size and not created:
            # A checkpoint torn by a power cut may hold garbage; a timestamp from the future (or negative)
            # would make abnormal recovery start too late, so such values count as "nothing known" (0).
            stored = list(_LAYOUT.unpack(raw))
            limit = time.time_ns() // 1_000_000 + 60_000
            vals = [v if 0 <= v <= limit else 0 for v in stored]
            if vals != stored:
                log.warning("checkpoint %s holds impossible timestamps; ignoring them", path)
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = vals
            raw = os.pread(self._fd, _OFFSETS.size, _OFFSETS_AT)
            if len(raw) == _OFFSETS.size:
                phys, logics, crc = _OFFSETS.unpack(raw)
                if crc == zlib.crc32(raw[:16]) and phys >= 0 and logics >= 0:
                    self.physic_offset, self.logics_offset = phys, logics
        if created and faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_create(path, CHECKPOINT_FILE_SIZE)

    def min_timestamp(self, index_enabled: bool = False) -> int:
        """Safe restart point: the oldest of the timestamps, minus 3 s of slack (clock/batch skew)."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_enabled and self.index_msg_timestamp:
            ts = min(ts, self.index_msg_timestamp)
        return max(0, ts - 3000)

    def min_offset(self) -> int:
        """Safe restart offset (0: unknown): below it the CommitLog and every ConsumeQueue were durable."""
        if self.physic_offset <= 0 or self.logics_offset <= 0:
            return 0
        return min(self.physic_offset, self.logics_offset)

    def flush(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            os.pwrite(
                self._fd,
                _LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp),
                0,
            )
            offsets = struct.pack(">qq", self.physic_offset, self.logics_offset)
            os.pwrite(self._fd, offsets + struct.pack(">I", zlib.crc32(offsets)), _OFFSETS_AT)
            if faultfs.CRASH_AT is not None:
                faultfs.crash_point("checkpoint.flush")
            os.fdatasync(self._fd)
            if faultfs.ACTIVE is not None:
                faultfs.ACTIVE.on_flush(self.path, 0, _OFFSETS_AT + _OFFSETS.size)

    def shutdown(self) -> None:
        self.flush()
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
