"""RouteInfoManager and KVConfigManager without sockets (injected clock, tmp files)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from rocketq.namesrv.kvconfig import KVConfigError, KVConfigManager
from rocketq.namesrv.route_info import RouteInfoManager
from rocketq.protocol.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wrapper(topics: dict[str, int], counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        {t: TopicConfig(t, n, n) for t, n in topics.items()}, DataVersion(1, counter)
    )


def test_register_expire_by_injected_clock() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock=clock, broker_channel_expired_s=120)
    ch = object()
    rim.register_broker("C", "10.0.0.1:10911", "a", 0, "10.0.0.1:10912", wrapper({"T": 4}), [], ch)
    assert rim.pick_topic_route_data("T") is not None
    clock.now += 119
    assert rim.scan_not_active_broker() == []
    clock.now += 2
    assert rim.scan_not_active_broker() == [("10.0.0.1:10911", ch)]
    assert rim.pick_topic_route_data("T") is None
    assert rim.broker_addr_table == {} and rim.cluster_addr_table == {}


def test_reregistration_refreshes_liveness_and_only_changed_versions_rewrite_queues() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock=clock)
    rim.register_broker("C", "h:1", "a", 0, "", wrapper({"T": 4}, counter=1))
    rim.delete_topic("T")
    clock.now += 100
    rim.register_broker("C", "h:1", "a", 0, "", wrapper({"T": 4}, counter=1))
    assert rim.pick_topic_route_data("T") is None  # same data version: queues not rewritten (like Java)
    rim.register_broker("C", "h:1", "a", 0, "", wrapper({"T": 8}, counter=2))
    route = rim.pick_topic_route_data("T")
    assert route is not None and route.queue_datas[0].read_queue_nums == 8
    clock.now += 100
    assert rim.scan_not_active_broker() == []  # refreshed at +100


def test_slave_gets_master_and_channel_close_drops_only_that_broker() -> None:
    rim = RouteInfoManager(clock=Clock())
    m, s = object(), object()
    rim.register_broker("C", "h:1", "a", 0, "h:2", wrapper({"T": 4}), [], m)
    res = rim.register_broker("C", "h:3", "a", 1, "h:4", wrapper({"T": 4}), [], s)
    assert (res.master_addr, res.ha_server_addr) == ("h:1", "h:2")
    assert rim.on_channel_destroy(m) == ["h:1"]
    route = rim.pick_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: "h:3"}
    res = rim.register_broker("C", "h:3", "a", 0, "h:4", wrapper({"T": 4}), [], s)  # promoted
    assert rim.broker_addr_table["a"].broker_addrs == {0: "h:3"}
    assert res.master_addr is None


def test_unregister_last_broker_removes_cluster_and_topics() -> None:
    rim = RouteInfoManager(clock=Clock())
    rim.register_broker("C", "h:1", "a", 0, "", wrapper({"T": 4, "U": 1}))
    rim.register_broker("C", "h:2", "b", 0, "", wrapper({"T": 4}))
    rim.unregister_broker("C", "h:1", "a", 0)
    assert rim.get_all_topic_list().topic_list == {"T"}
    assert rim.cluster_addr_table == {"C": {"b"}}
    rim.unregister_broker("C", "h:2", "b", 0)
    assert rim.cluster_addr_table == {} and rim.topic_queue_table == {}


def test_write_perm_and_topics_by_cluster() -> None:
    rim = RouteInfoManager(clock=Clock())
    rim.register_broker("C1", "h:1", "a", 0, "", wrapper({"T": 4, "X": 1}))
    rim.register_broker("C2", "h:2", "b", 0, "", wrapper({"T": 4}))
    assert rim.wipe_write_perm_of_broker("a") == 2
    assert rim.topic_queue_table["T"]["a"].perm == 4
    assert rim.add_write_perm_of_broker("a") == 2
    assert rim.topic_queue_table["X"]["a"].perm == 6
    assert rim.get_topics_by_cluster("C2").topic_list == {"T"}
    assert rim.get_topics_by_cluster("nope").topic_list == set()


def test_query_data_version() -> None:
    rim = RouteInfoManager(clock=Clock())
    assert rim.query_data_version("h:1", DataVersion(1, 1)) == (True, None)
    rim.register_broker("C", "h:1", "a", 0, "", wrapper({"T": 4}, counter=5))
    assert rim.query_data_version("h:1", DataVersion(1, 5)) == (False, DataVersion(1, 5))
    assert rim.query_data_version("h:1", DataVersion(1, 6))[0] is True


def test_kv_persist_reload_and_limits(tmp_path: Path) -> None:
    path = tmp_path / "ns" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("A", "k", "v")
    kv.put("A", "k2", "v2")
    assert kv.delete("A", "k2") and not kv.delete("A", "k2")

    async def persist_many() -> None:
        await asyncio.gather(*(kv.persist() for _ in range(10)))

    asyncio.run(persist_many())
    assert orjson.loads(path.read_bytes()) == {"configTable": {"A": {"k": "v"}}}
    assert not (tmp_path / "ns" / "kvConfig.json.tmp").exists()
    again = KVConfigManager(path)
    again.load()
    assert again.get("A", "k") == "v" and again.list_namespace("A") == {"k": "v"}
    with pytest.raises(KVConfigError):
        kv.put("", "k", "v")
    with pytest.raises(KVConfigError):
        kv.put("A", "k", "x" * 100_000)
    path.write_bytes(b"{broken")
    broken = KVConfigManager(path)
    broken.load()
    assert broken.table == {}


def test_unit_topic_lists_follow_topic_sys_flag() -> None:
    rim = RouteInfoManager(clock=Clock())
    table = {
        "U": TopicConfig("U", 1, 1, topic_sys_flag=1),
        "S": TopicConfig("S", 1, 1, topic_sys_flag=2),
        "US": TopicConfig("US", 1, 1, topic_sys_flag=3),
        "N": TopicConfig("N", 1, 1),
    }
    rim.register_broker("C", "h:1", "a", 0, "", TopicConfigSerializeWrapper(table, DataVersion(1, 1)))
    assert rim.get_unit_topics().topic_list == {"U", "US"}
    assert rim.get_has_unit_sub_topic_list().topic_list == {"S", "US"}
    assert rim.get_has_unit_sub_un_unit_topic_list().topic_list == {"S"}
