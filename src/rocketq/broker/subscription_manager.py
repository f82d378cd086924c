"""SubscriptionGroupManager: consumer group configs (retry queue count, max retries, ...), persisted as
config/subscriptionGroup.json."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from rocketq.protocol.bodies import SubscriptionGroupConfig
from rocketq.protocol.properties import (
    CLIENT_INNER_PRODUCER_GROUP,
    DEFAULT_CONSUMER_GROUP,
    DEFAULT_PRODUCER_GROUP,
    TOOLS_CONSUMER_GROUP,
)
from rocketq.protocol.route import DataVersion

from .config import BrokerConfig
from .persist import ConfigFile

log = logging.getLogger(__name__)


def parse_group_config(obj: dict[str, Any]) -> SubscriptionGroupConfig:
    """A config from its JSON object; ValueError (ProtocolError included) if malformed or unnamed."""
    sgc = SubscriptionGroupConfig.from_obj(obj)
    if not sgc.group_name:
        raise ValueError("subscription group config without groupName")
    return sgc


def _sorted_obj(sgc: SubscriptionGroupConfig) -> dict[str, Any]:
    return dict(sorted(sgc.to_obj().items()))  # keys in fastjson's (sorted) order, as persisted before


class SubscriptionGroupManager:
    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion(int(time.time() * 1000), 0)
        self._file = ConfigFile(os.path.join(cfg.config_dir, "subscriptionGroup.json"))
        self._limit_logged_at = -60.0

    def load(self) -> None:
        obj = self._file.load()
        if isinstance(obj, dict):
            for name, raw in (obj.get("subscriptionGroupTable") or {}).items():
                if isinstance(raw, dict):
                    raw.setdefault("groupName", name)
                    self.table[name] = parse_group_config(raw)
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
            "subscriptionGroupTable": {k: _sorted_obj(v) for k, v in self.table.items()},
        }

    def persist(self) -> None:
        self._file.persist_async(self.snapshot())

    def persist_sync(self) -> None:
        self._file.persist_sync(self.snapshot())

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; auto-created (autoCreateSubscriptionGroup) while the table holds fewer than
        autoCreateSubscriptionGroupLimit groups, so that made-up group names can not grow it (and the file
        rewritten on every change) without bound. Groups created by an admin are not limited."""
        sgc = self.table.get(group)
        if sgc is None and self.cfg["autoCreateSubscriptionGroup"]:
            limit = self.cfg["autoCreateSubscriptionGroupLimit"]
            if len(self.table) >= limit:
                now = time.monotonic()
                if now - self._limit_logged_at >= 60.0:
                    self._limit_logged_at = now
                    log.warning(
                        "not auto-creating subscription group %s: %d groups exist "
                        "(autoCreateSubscriptionGroupLimit=%d); create it with mqadmin updateSubGroup",
                        group, len(self.table), limit,
                    )  # fmt: skip
                return None
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
