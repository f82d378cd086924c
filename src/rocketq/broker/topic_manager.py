"""TopicConfigManager: topic configs + dataVersion, persisted as config/topics.json."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from rocketq.protocol.codes import PERM_INHERIT, PERM_READ, PERM_WRITE
from rocketq.protocol.properties import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRACE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    reply_topic,
)
from rocketq.protocol.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper

from .config import BrokerConfig
from .persist import ConfigFile

PERM_RW = PERM_READ | PERM_WRITE


def _now_ms() -> int:
    return int(time.time() * 1000)


class TopicConfigManager:
    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(_now_ms(), 0)
        self.system_topics: set[str] = set()
        self._file = ConfigFile(os.path.join(cfg.config_dir, "topics.json"))
        # called with no args after any change (controller re-registers with the namesrv)
        self.on_change: Callable[[], None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        obj = self._file.load()
        if isinstance(obj, dict):
            wrapper = TopicConfigSerializeWrapper.from_obj(obj)
            self.table.update(wrapper.topic_config_table)
            self.data_version = wrapper.data_version
        self._create_system_topics()

    def _system(self, name: str, queues: int, perm: int = PERM_RW) -> None:
        self.system_topics.add(name)
        if name not in self.table:
            self.table[name] = TopicConfig(name, queues, queues, perm)

    def _create_system_topics(self) -> None:
        cfg = self.cfg
        self._system(SELF_TEST_TOPIC, 1)
        if cfg["autoCreateTopicEnable"]:
            n = cfg["defaultTopicQueueNums"]
            self._system(AUTO_CREATE_TOPIC_KEY_TOPIC, n, PERM_RW | PERM_INHERIT)
        else:
            self.system_topics.add(AUTO_CREATE_TOPIC_KEY_TOPIC)
            # no TBW102 route when auto-create is off (clients then get TOPIC_NOT_EXIST, as in RocketMQ)
            self.table.pop(AUTO_CREATE_TOPIC_KEY_TOPIC, None)
        self._system(SCHEDULE_TOPIC, len(cfg.delay_levels_ms))
        if cfg["clusterTopicEnable"]:
            self._system(cfg["brokerClusterName"], 16, PERM_RW)
        if cfg["brokerTopicEnable"]:
            self._system(cfg["brokerName"], 1, PERM_RW)
        self._system(reply_topic(cfg["brokerClusterName"]), 1)
        self._system(TRANS_HALF_TOPIC, 1)
        self._system(TRANS_OP_HALF_TOPIC, 1)
        if cfg["traceTopicEnable"]:
            self._system(cfg["msgTraceTopicName"], 1)
        else:
            self._system(TRACE_TOPIC, 1)

    def ensure_system_topics(self) -> None:
        """Re-apply the system topic rules after a runtime config change; registers if the table changed."""
        before = set(self.table)
        self._create_system_topics()
        if set(self.table) != before:
            self._changed()

    def snapshot(self) -> dict:
        return {
            "dataVersion": self.data_version.to_obj(),
            "topicConfigTable": {k: v.to_obj() for k, v in self.table.items()},
        }

    def persist(self) -> None:
        self._file.persist_async(self.snapshot())

    def persist_sync(self) -> None:
        self._file.persist_sync(self.snapshot())

    async def written(self) -> None:
        """Wait until every change so far is in config/topics.json."""
        await self._file.written()

    # -- queries -----------------------------------------------------------------------------
    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(dict(self.table), self.data_version)

    # -- changes -----------------------------------------------------------------------------
    def _changed(self, notify: bool = True) -> None:
        self.data_version = self.data_version.next_version(_now_ms())
        self.persist()
        if notify and self.on_change is not None:
            self.on_change()

    def update(self, tc: TopicConfig, notify: bool = True) -> None:
        """notify=False: the caller registers with the name servers itself (and waits for it)."""
        self.table[tc.topic_name] = tc
        self._changed(notify)

    def delete(self, topic: str, notify: bool = True) -> TopicConfig | None:
        old = self.table.pop(topic, None)
        if old is not None:
            self._changed(notify)
        return old

    def create_in_send(
        self, topic: str, default_topic: str, queue_nums: int, sys_flag: int
    ) -> TopicConfig | None:
        """Auto-create from the default (TBW102) topic if it exists with INHERIT perm."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        default = self.table.get(default_topic)
        if default is None or not default.perm & PERM_INHERIT:
            return None
        if not self.cfg["autoCreateTopicEnable"] and default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC:
            return None
        n = max(1, min(queue_nums, default.write_queue_nums))
        tc = TopicConfig(topic, n, n, default.perm & ~PERM_INHERIT, topic_sys_flag=sys_flag)
        self.update(tc)
        return tc

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, sys_flag: int, notify: bool = True
    ) -> TopicConfig:
        """Retry and DLQ topics: created on demand with fixed queue count and perm."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=sys_flag)
        self.update(tc, notify)
        return tc
