"""SubscriptionGroupManager: consumer group configs (retry queue count, max retries, ...), persisted as
config/subscriptionGroup.json."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from rocketq.protocol.properties import (
    CLIENT_INNER_PRODUCER_GROUP,
    DEFAULT_CONSUMER_GROUP,
    DEFAULT_PRODUCER_GROUP,
    TOOLS_CONSUMER_GROUP,
)
from rocketq.protocol.route import DataVersion

from .config import BrokerConfig
from .persist import ConfigFile

_FIELDS = {
    "groupName": ("group_name", str),
    "consumeEnable": ("consume_enable", bool),
    "consumeFromMinEnable": ("consume_from_min_enable", bool),
    "consumeBroadcastEnable": ("consume_broadcast_enable", bool),
    "retryQueueNums": ("retry_queue_nums", int),
    "retryMaxTimes": ("retry_max_times", int),
    "brokerId": ("broker_id", int),
    "whichBrokerWhenConsumeSlowly": ("which_broker_when_consume_slowly", int),
    "notifyConsumerIdsChangedEnable": ("notify_consumer_ids_changed_enable", bool),
}


def _as_bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() == "true"
    return bool(v)


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_obj(self) -> dict[str, Any]:
        return {k: getattr(self, attr) for k, (attr, _) in sorted(_FIELDS.items())}

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        kwargs: dict[str, Any] = {}
        for key, (attr, typ) in _FIELDS.items():
            if key in obj and obj[key] is not None:
                v = obj[key]
                kwargs[attr] = _as_bool(v) if typ is bool else typ(v)
        if not kwargs.get("group_name"):
            raise ValueError("subscription group config without groupName")
        return cls(**kwargs)


class SubscriptionGroupManager:
    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion(int(time.time() * 1000), 0)
        self._file = ConfigFile(os.path.join(cfg.config_dir, "subscriptionGroup.json"))

    def load(self) -> None:
        obj = self._file.load()
        if isinstance(obj, dict):
            for name, raw in (obj.get("subscriptionGroupTable") or {}).items():
                if isinstance(raw, dict):
                    raw.setdefault("groupName", name)
                    self.table[name] = SubscriptionGroupConfig.from_obj(raw)
            dv = obj.get("dataVersion")
            if isinstance(dv, dict):
                self.data_version = DataVersion.from_obj(dv)
        for g in (
            TOOLS_CONSUMER_GROUP,
            DEFAULT_CONSUMER_GROUP,
            CLIENT_INNER_PRODUCER_GROUP,
            DEFAULT_PRODUCER_GROUP,
        ):
            self.table.setdefault(
                g, SubscriptionGroupConfig(g, retry_max_times=self.cfg["maxReconsumeTimes"])
            )

    def snapshot(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_obj(),
            "subscriptionGroupTable": {k: v.to_obj() for k, v in self.table.items()},
        }

    def persist(self) -> None:
        self._file.persist_async(self.snapshot())

    def persist_sync(self) -> None:
        self._file.persist_sync(self.snapshot())

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        sgc = self.table.get(group)
        if sgc is None and self.cfg["autoCreateSubscriptionGroup"]:
            sgc = SubscriptionGroupConfig(group, retry_max_times=self.cfg["maxReconsumeTimes"])
            self.update(sgc)
        return sgc

    def update(self, sgc: SubscriptionGroupConfig) -> None:
        self.table[sgc.group_name] = sgc
        self.data_version = self.data_version.next_version(int(time.time() * 1000))
        self.persist()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self.data_version = self.data_version.next_version(int(time.time() * 1000))
        self.persist()
        return True
