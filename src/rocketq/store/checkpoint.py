"""StoreCheckpoint: <root>/checkpoint, RocketMQ's layout — a 4 KiB file whose first 24 bytes are three
big-endian int64 timestamps (ms): physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp. Each is the
store timestamp of the newest record known durable in the CommitLog / ConsumeQueues / IndexFiles;
abnormal recovery starts scanning at the CommitLog segment that begins before their minimum."""

from __future__ import annotations

import logging
import os
import struct
import threading
import time

from . import faultfs

log = logging.getLogger(__name__)

CHECKPOINT_FILE_SIZE = 4096
_LAYOUT = struct.Struct(">qqq")


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
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
        if created and faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_create(path, CHECKPOINT_FILE_SIZE)

    def min_timestamp(self, index_enabled: bool = False) -> int:
        """Safe restart point: the oldest of the timestamps, minus 3 s of slack (clock/batch skew)."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_enabled and self.index_msg_timestamp:
            ts = min(ts, self.index_msg_timestamp)
        return max(0, ts - 3000)

    def flush(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            os.pwrite(
                self._fd,
                _LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp),
                0,
            )
            if faultfs.CRASH_AT is not None:
                faultfs.crash_point("checkpoint.flush")
            os.fdatasync(self._fd)
            if faultfs.ACTIVE is not None:
                faultfs.ACTIVE.on_flush(self.path, 0, _LAYOUT.size)

    def shutdown(self) -> None:
        self.flush()
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
