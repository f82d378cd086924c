"""ConsumerOffsetManager: committed offsets per "topic@group" and queue, persisted (periodically and at
shutdown) as config/consumerOffset.json in RocketMQ's layout {"offsetTable":{"topic@group":{"0":12}}}."""

from __future__ import annotations

import os
from typing import Any

from .config import BrokerConfig
from .persist import ConfigFile

SEP = "@"


class ConsumerOffsetManager:
    def __init__(self, cfg: BrokerConfig) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self._file = ConfigFile(os.path.join(cfg.config_dir, "consumerOffset.json"))
        self._dirty = False

    def load(self) -> None:
        obj = self._file.load()
        if not isinstance(obj, dict):
            return
        for key, queues in (obj.get("offsetTable") or {}).items():
            if isinstance(queues, dict) and SEP in key:
                try:
                    self.table[key] = {int(q): int(o) for q, o in queues.items()}
                except (TypeError, ValueError):
                    continue

    def snapshot(self) -> dict[str, Any]:
        return {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}}

    def persist(self, force: bool = False) -> None:
        if self._dirty or force:
            self._dirty = False
            self._file.persist_async(self.snapshot())

    def persist_sync(self) -> None:
        self._dirty = False
        self._file.persist_sync(self.snapshot())

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic + SEP + group
        queues = self.table.get(key)
        if queues is None:
            queues = self.table[key] = {}
        queues[queue_id] = offset
        self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """-1 when the group has no offset for the queue."""
        queues = self.table.get(topic + SEP + group)
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(topic + SEP + group, {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self.table:
            t, _, g = key.partition(SEP)
            if t == topic:
                out.add(g)
        return out

    def topics_of_group(self, group: str) -> set[str]:
        out = set()
        for key in self.table:
            t, _, g = key.partition(SEP)
            if g == group:
                out.add(t)
        return out

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.partition(SEP)[0] == topic]:
            del self.table[key]
            self._dirty = True

    def remove_group(self, group: str) -> None:
        for key in [k for k in self.table if k.partition(SEP)[2] == group]:
            del self.table[key]
            self._dirty = True
