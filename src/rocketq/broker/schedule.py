"""Delay-level scheduler: SCHEDULE_TOPIC_XXXX queue (level-1) -> the real topic when due.

Each level's queue is FIFO in delivery time (same delay), so a level stops at its first message that is
not yet due. Progress per level is persisted as config/delayOffset.json ({"offsetTable":{"1":5}}).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING

from rocketq.protocol.frame import ProtocolError
from rocketq.protocol.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    SCHEDULE_TOPIC,
)
from rocketq.protocol.record import decode_record

from .persist import ConfigFile
from .restore import STORED, real_destination, restored

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger(__name__)

TICK_S = 0.1
BATCH = 32
MAX_PER_TICK = 2048  # per level: a backlog (e.g. after downtime) never monopolises the event loop
GROUP = "SCHEDULE_SERVICE"


class ScheduleMessageService:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        self.levels = ctl.delay_levels
        self.offsets: dict[int, int] = {}
        self._file = ConfigFile(os.path.join(ctl.cfg.config_dir, "delayOffset.json"))
        self._task: asyncio.Task[None] | None = None
        self._persist_task: asyncio.Task[None] | None = None
        self._dirty = False

    def load(self) -> None:
        obj = self._file.load()
        if isinstance(obj, dict):
            for k, v in (obj.get("offsetTable") or {}).items():
                try:
                    self.offsets[int(k)] = int(v)
                except (TypeError, ValueError):
                    continue

    def snapshot(self) -> dict:
        return {"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())}}

    def persist_sync(self) -> None:
        self._file.persist_sync(self.snapshot())

    def persist(self) -> None:
        self._file.persist_async(self.snapshot())

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        self._persist_task = loop.create_task(self._persist_loop())

    def stop(self) -> None:
        for t in (self._task, self._persist_task):
            if t is not None:
                t.cancel()

    async def _persist_loop(self) -> None:
        period = max(self.ctl.cfg["flushDelayOffsetInterval"] / 1000.0, 0.1)
        while True:
            await asyncio.sleep(period)
            if self._dirty:
                self._dirty = False
                self._file.persist_async(self.snapshot())

    async def _run(self) -> None:
        while True:
            try:
                for level in range(1, self.levels.max_level + 1):
                    self._deliver_level(level)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delay scheduler tick failed")
            await asyncio.sleep(TICK_S)

    def _deliver_level(self, level: int) -> None:
        store = self.ctl.store
        qid = level - 1
        offset = self.offsets.get(level, 0)
        max_off = store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid)
        if offset >= max_off:
            return
        min_off = store.get_min_offset_in_queue(SCHEDULE_TOPIC, qid)
        if offset < min_off:
            offset = min_off
        delay = self.levels.delay_ms(level)
        now = int(time.time() * 1000)
        budget = MAX_PER_TICK
        while offset < max_off and budget > 0:
            budget -= BATCH
            result = store.get_message(GROUP, SCHEDULE_TOPIC, qid, offset, BATCH, None)
            try:
                if result.status.name != "FOUND" or not result.buffers:
                    nxt = result.next_begin_offset
                    if nxt > offset:  # skip holes (e.g. removed files)
                        offset = nxt
                        self._advance(level, offset)
                        continue
                    return
                for buf in result.buffers:
                    try:
                        msg = decode_record(buf)
                    except ProtocolError:
                        offset += 1
                        self._advance(level, offset)
                        continue
                    due = msg.store_timestamp + delay
                    if due > now:
                        return
                    if not self._redeliver(msg):
                        return  # store refused: retry on the next tick
                    offset = msg.queue_offset + 1
                    self._advance(level, offset)
            finally:
                try:
                    result.release()
                except (BufferError, ValueError):
                    pass

    def _advance(self, level: int, offset: int) -> None:
        self.offsets[level] = offset
        self._dirty = True

    def _redeliver(self, msg) -> bool:
        props = dict(msg.properties)
        topic, qid = real_destination(props)
        if not topic:
            log.warning("delayed message at %d has no REAL_TOPIC; dropped", msg.commit_log_offset)
            return True
        props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        result = self.ctl.store.put_message(restored(msg, topic, qid, props))
        if result.status.name in STORED:
            return True
        if result.status.name in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
            log.warning(
                "delayed message at %d is illegal (%s); dropped", msg.commit_log_offset, result.status.name
            )
            return True
        log.warning("re-storing delayed message failed: %s", result.status.name)
        return False
