"""SlaveSynchronize: a slave copies its master's metadata every 10 s, so it can serve consumers (and take over
reads) with the right state: GET_ALL_TOPIC_CONFIG (21) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) replace the
slave's tables when the master's DataVersion differs; GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET
(45) are merged over the slave's (RocketMQ's putAll). Offsets consumers committed to the slave while the
master was away are overwritten once it is back: duplicates, never loss. With aclEnable the calls are signed
with innerClientAuthenticationCredentials. A master that does not answer leaves the slave's copy as it is.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from rocketq.protocol import lenient_json
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.route import DataVersion, TopicConfigSerializeWrapper

from .subscription_manager import parse_group_config

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger(__name__)

PERIOD_S = 10.0
TIMEOUT_S = 3.0
MAX_BODY = 64 * 1024 * 1024  # a master's tables; anything bigger is refused rather than held


class SlaveSynchronize:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        self.synced_at = 0.0
        self.last_error = ""

    async def _fetch(self, addr: str, code: int) -> Any:
        # the broker's client signs every request with innerClientAuthenticationCredentials when set
        req = RemotingCommand.request(code, {})
        resp = await self.ctl.client.invoke(addr, req, TIMEOUT_S)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {resp.code}: {resp.remark}")
        body = resp.body_bytes
        if len(body) > MAX_BODY:
            raise RuntimeError(f"answer of {len(body)} bytes")
        return lenient_json.loads(body) if body else {}

    async def sync_all(self) -> bool:
        rep = self.ctl.replication
        addr = rep.ha.master_addr if rep is not None else None
        if not addr:
            return False
        try:
            self._topics(await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
            self._offsets(await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET))
            self._delay_offsets(await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET))
            self._groups(await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        except Exception as exc:
            msg = f"metadata sync from master {addr} failed: {exc}"
            if msg != self.last_error:
                log.warning("%s", msg)
            self.last_error = msg
            return False
        self.synced_at = time.time()
        self.last_error = ""
        return True

    def _topics(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise ValueError("topic config is not an object")
        wrapper = TopicConfigSerializeWrapper.from_obj(obj)
        topics = self.ctl.topics
        if topics.data_version == wrapper.data_version:
            return
        topics.table.clear()
        topics.table.update(wrapper.topic_config_table)
        topics.data_version = wrapper.data_version
        topics.persist()
        log.info("slave sync: %d topics from the master", len(topics.table))

    def _offsets(self, obj: Any) -> None:
        table = (obj or {}).get("offsetTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise ValueError("consumer offsets are not an object")
        offsets = self.ctl.offsets
        for key, queues in table.items():
            if isinstance(queues, dict) and "@" in str(key):
                try:
                    offsets.table[str(key)] = {int(q): int(o) for q, o in queues.items()}
                except (TypeError, ValueError):
                    continue
        offsets.persist(force=True)

    def _delay_offsets(self, obj: Any) -> None:
        schedule = self.ctl.schedule
        table = (obj or {}).get("offsetTable") if isinstance(obj, dict) else None
        if schedule is None or not isinstance(table, dict):
            return
        for level, off in table.items():
            try:
                schedule.offsets[int(level)] = int(off)
            except (TypeError, ValueError):
                continue
        schedule.persist()

    def _groups(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise ValueError("subscription groups are not an object")
        dv = obj.get("dataVersion")
        version = DataVersion.from_obj(dv) if isinstance(dv, dict) else None
        groups = self.ctl.subscriptions
        if version is not None and groups.data_version == version:
            return
        table = {}
        for name, raw in (obj.get("subscriptionGroupTable") or {}).items():
            if isinstance(raw, dict):
                raw.setdefault("groupName", name)
                try:
                    table[str(name)] = parse_group_config(raw)
                except ValueError:
                    continue
        groups.table.clear()
        groups.table.update(table)
        if version is not None:
            groups.data_version = version
        groups.persist()
