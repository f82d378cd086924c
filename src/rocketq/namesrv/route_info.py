"""The NameServer's route registry: clusters, brokers, topic queues, broker liveness.

Pure bookkeeping (no I/O, no asyncio): the clock is injected so expiry is testable. Every method runs on
the event loop thread, so no locking is needed. ``channel`` values are opaque handles the caller uses to
tie a registration to its connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocketq.protocol.codes import PERM_READ, PERM_WRITE
from rocketq.protocol.route import (
    MASTER_ID,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

BROKER_CHANNEL_EXPIRED_S = 120.0
TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update: float
    data_version: DataVersion
    channel: Any
    ha_server_addr: str


@dataclass(slots=True)
class RegisterBrokerResult:
    master_addr: str | None = None
    ha_server_addr: str | None = None


class RouteInfoManager:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        broker_channel_expired_s: float = BROKER_CHANNEL_EXPIRED_S,
    ) -> None:
        self.clock = clock
        self.broker_channel_expired_s = broker_channel_expired_s
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}  # topic -> brokerName -> queues
        self.broker_addr_table: dict[str, BrokerData] = {}  # brokerName -> addrs by id
        self.cluster_addr_table: dict[str, set[str]] = {}  # cluster -> brokerNames
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}  # brokerAddr -> liveness
        self.filter_server_table: dict[str, list[str]] = {}  # brokerAddr -> filter servers

    # -- registration ------------------------------------------------------------------------
    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: list[str] | None = None,
        channel: Any = None,
    ) -> RegisterBrokerResult:
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # The same address under another id (a slave promoted to master, or the reverse): drop the old id.
        for bid in [bid for bid, a in addrs.items() if a == broker_addr and bid != broker_id]:
            del addrs[bid]
        register_first = addrs.get(broker_id) is None or register_first
        addrs[broker_id] = broker_addr

        version = topic_config_wrapper.data_version if topic_config_wrapper else DataVersion()
        # Only a master's topics make routes; skip the work when its config version did not change.
        if (
            topic_config_wrapper is not None
            and broker_id == MASTER_ID
            and (register_first or self.is_broker_topic_config_changed(broker_addr, version))
        ):
            for cfg in topic_config_wrapper.topic_config_table.values():
                self._put_queue_data(broker_name, cfg.topic_name, cfg)

        self.broker_live_table[broker_addr] = BrokerLiveInfo(self.clock(), version, channel, ha_server_addr)
        if filter_server_list:
            self.filter_server_table[broker_addr] = list(filter_server_list)
        else:
            self.filter_server_table.pop(broker_addr, None)

        result = RegisterBrokerResult()
        if broker_id != MASTER_ID:
            master = addrs.get(MASTER_ID)
            if master is not None:
                live = self.broker_live_table.get(master)
                if live is not None:
                    result.master_addr = master
                    result.ha_server_addr = live.ha_server_addr
        return result

    def _put_queue_data(self, broker_name: str, topic: str, cfg: Any) -> None:
        qd = QueueData(broker_name, cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, cfg.topic_sys_flag)
        self.topic_queue_table.setdefault(topic, {})[broker_name] = qd

    def is_broker_topic_config_changed(self, broker_addr: str, version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != version

    def query_data_version(self, broker_addr: str, version: DataVersion) -> tuple[bool, DataVersion | None]:
        """(changed, the version the NameServer holds); refreshes the broker's liveness like Java does."""
        changed = self.is_broker_topic_config_changed(broker_addr, version)
        live = self.broker_live_table.get(broker_addr)
        if live is None:
            return changed, None
        if not changed:
            live.last_update = self.clock()
        return changed, live.data_version

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        remove_name = False
        if broker_data is not None:
            if broker_data.broker_addrs.get(broker_id) == broker_addr:
                del broker_data.broker_addrs[broker_id]
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_name = True
        if remove_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topics_of_broker(broker_name)

    def _remove_topics_of_broker(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            if queues.pop(broker_name, None) is not None and not queues:
                del self.topic_queue_table[topic]

    # -- liveness ----------------------------------------------------------------------------
    def scan_not_active_broker(self) -> list[tuple[str, Any]]:
        """Drop brokers not re-registered within the expiry; returns their (addr, channel)."""
        deadline = self.clock() - self.broker_channel_expired_s
        expired = [
            (a, live.channel) for a, live in self.broker_live_table.items() if live.last_update < deadline
        ]
        for addr, _ in expired:
            self._destroy_addr(addr)
        return expired

    def on_channel_destroy(self, channel: Any) -> list[str]:
        """A connection closed: drop every broker address registered over it."""
        addrs = [a for a, live in self.broker_live_table.items() if live.channel is channel]
        for addr in addrs:
            self._destroy_addr(addr)
        return addrs

    def _destroy_addr(self, broker_addr: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for broker_name, bd in list(self.broker_addr_table.items()):
            for bid in [bid for bid, a in bd.broker_addrs.items() if a == broker_addr]:
                del bd.broker_addrs[bid]
            if not bd.broker_addrs:
                del self.broker_addr_table[broker_name]
                for cluster in list(self.cluster_addr_table):
                    names = self.cluster_addr_table[cluster]
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster]
                self._remove_topics_of_broker(broker_name)

    # -- queries -----------------------------------------------------------------------------
    def pick_topic_route_data(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        queue_datas: list[QueueData] = []
        broker_datas: list[BrokerData] = []
        filter_table: dict[str, list[str]] = {}
        for broker_name in sorted(queues):
            qd = queues[broker_name]
            queue_datas.append(
                QueueData(qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag)
            )
            bd = self.broker_addr_table.get(broker_name)
            if bd is None:
                continue
            broker_datas.append(BrokerData(bd.cluster, bd.broker_name, dict(bd.broker_addrs)))
            for addr in bd.broker_addrs.values():
                servers = self.filter_server_table.get(addr)
                if servers:
                    filter_table[addr] = list(servers)
        if not broker_datas:
            return None
        return TopicRouteData(broker_datas, queue_datas, filter_table)

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {
                n: BrokerData(bd.cluster, bd.broker_name, dict(bd.broker_addrs))
                for n, bd in self.broker_addr_table.items()
            },
            {c: set(names) for c, names in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(set(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster_name: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster_name, set())
        return TopicList({t for t, queues in self.topic_queue_table.items() if not names.isdisjoint(queues)})

    def get_unit_topics(self) -> TopicList:
        return self._topics_with(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_with(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    def get_has_unit_sub_un_unit_topic_list(self) -> TopicList:
        return self._topics_with(lambda f: not f & TOPIC_SYS_FLAG_UNIT and bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    def _topics_with(self, pred: Callable[[int], bool]) -> TopicList:
        # Like RocketMQ, the first broker's queue data decides for the topic.
        out = set()
        for topic, queues in self.topic_queue_table.items():
            first = next(iter(queues.values()), None)
            if first is not None and pred(first.topic_sys_flag):
                out.add(topic)
        return TopicList(out)

    # -- admin -------------------------------------------------------------------------------
    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Remove a topic's route; with a cluster name only that cluster's brokers' queues."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        for broker_name in self.cluster_addr_table.get(cluster_name, ()):
            queues.pop(broker_name, None)
        if not queues:
            del self.topic_queue_table[topic]

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, add=False)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, add=True)

    def _operate_write_perm(self, broker_name: str, *, add: bool) -> int:
        count = 0
        for queues in self.topic_queue_table.values():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm = PERM_READ | PERM_WRITE if add else qd.perm & ~PERM_WRITE
                count += 1
        return count
