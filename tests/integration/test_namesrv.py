"""A NameServer process over real TCP: registration, routes, expiry, admin codes, KV persistence, load."""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest
from tests.helpers.procs import RocketqProcess, start_namesrv

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.route import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    body_crc32,
)
from rocketq.remoting import RemotingClient, run

C = RequestCode


def arun(fn: Callable[[], Awaitable[None]]) -> None:
    run(asyncio.wait_for(fn(), 60))  # type: ignore[arg-type]


def register_body(topics: dict[str, int], counter: int = 1) -> RegisterBrokerBody:
    table = {t: TopicConfig(t, n, n) for t, n in topics.items()}
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1_700_000_000_000, counter)), [])


def register_request(
    broker_name: str,
    broker_addr: str,
    topics: dict[str, int],
    *,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    compressed: bool = False,
    counter: int = 1,
    crc: int | None = None,
) -> RemotingCommand:
    body = register_body(topics, counter).encode_body(compressed)
    ext = {
        "brokerName": broker_name,
        "brokerAddr": broker_addr,
        "clusterName": cluster,
        "haServerAddr": broker_addr.replace(":", ":1"),
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(body_crc32(body) if crc is None else crc),
    }
    return RemotingCommand.request(C.REGISTER_BROKER, ext, body)


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(C.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def route(client: RemotingClient, addr: str, topic: str) -> TopicRouteData | None:
    resp = await client.invoke(addr, route_request(topic))
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        assert resp.remark == f"No topic route info in name server for the topic: {topic}"
        return None
    assert resp.code == ResponseCode.SUCCESS, resp
    return TopicRouteData.decode(resp.body)


async def wait_until(pred: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


@pytest.fixture
def fast_expiry_namesrv(tmp_path: Path) -> RocketqProcess:
    proc = start_namesrv(
        tmp_path / "home", extra_args=["--broker-expire-s", "1.0", "--scan-interval-s", "0.2"]
    )
    yield proc  # type: ignore[misc]
    assert proc.stop() == 0


def test_register_route_expiry_and_unregister(fast_expiry_namesrv: RocketqProcess) -> None:
    ns = fast_expiry_namesrv.addr

    async def body() -> None:
        async with RemotingClient() as broker, RemotingClient() as client:
            assert await route(client, ns, "TopicTest") is None
            resp = await broker.invoke(ns, register_request("broker-a", "127.0.0.1:10911", {"TopicTest": 4}))
            assert resp.code == 0, resp
            r = await route(client, ns, "TopicTest")
            assert r is not None
            assert [(b.broker_name, b.cluster, b.broker_addrs) for b in r.broker_datas] == [
                ("broker-a", "DefaultCluster", {0: "127.0.0.1:10911"})
            ]
            (qd,) = r.queue_datas
            assert (qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm) == ("broker-a", 4, 4, 6)
            # the wire JSON is standard (quoted map keys) with RocketMQ's field names
            raw = orjson.loads((await client.invoke(ns, route_request("TopicTest"))).body)
            assert raw["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
            assert raw["queueDatas"][0]["writeQueueNums"] == 4 and "topicSysFlag" in raw["queueDatas"][0]

            # re-registration keeps it alive past the expiry
            for _ in range(6):
                await asyncio.sleep(0.3)
                req = register_request("broker-a", "127.0.0.1:10911", {"TopicTest": 4})
                assert (await broker.invoke(ns, req)).code == 0
            assert await route(client, ns, "TopicTest") is not None

            # silence: the broker expires (its connection stays open) and the route disappears
            t0 = time.monotonic()

            async def gone() -> bool:
                return await route(client, ns, "TopicTest") is None

            await wait_until(gone, 5)
            assert time.monotonic() - t0 >= 0.8

            # register again, then unregister explicitly
            assert (
                await broker.invoke(ns, register_request("broker-a", "127.0.0.1:10911", {"T2": 2}))
            ).code == 0
            assert await route(client, ns, "T2") is not None
            ext = {
                "brokerName": "broker-a",
                "brokerAddr": "127.0.0.1:10911",
                "clusterName": "DefaultCluster",
                "brokerId": "0",
            }
            resp = await broker.invoke(ns, RemotingCommand.request(C.UNREGISTER_BROKER, ext))
            assert resp.code == 0
            assert await route(client, ns, "T2") is None
            info = ClusterInfo.decode(
                (await client.invoke(ns, RemotingCommand.request(C.GET_BROKER_CLUSTER_INFO))).body
            )
            assert info.broker_addr_table == {} and info.cluster_addr_table == {}

    arun(body)


def test_broker_removed_when_its_connection_closes(namesrv: RocketqProcess) -> None:
    async def body() -> None:
        async with RemotingClient() as client:
            broker = RemotingClient()
            assert (
                await broker.invoke(namesrv.addr, register_request("b1", "127.0.0.1:20911", {"X": 1}))
            ).code == 0
            assert await route(client, namesrv.addr, "X") is not None
            await broker.close()

            async def gone() -> bool:
                return await route(client, namesrv.addr, "X") is None

            await wait_until(gone, 3)

    arun(body)


def test_compressed_body_crc_mismatch_and_master_slave(namesrv: RocketqProcess) -> None:
    ns = namesrv.addr

    async def body() -> None:
        async with RemotingClient() as broker, RemotingClient() as client:
            topics = {f"T{i}": 8 for i in range(50)}
            resp = await broker.invoke(
                ns, register_request("broker-z", "127.0.0.1:30911", topics, compressed=True)
            )
            assert resp.code == 0, resp
            r = await route(client, ns, "T7")
            assert r is not None and r.queue_datas[0].read_queue_nums == 8

            bad = register_request("broker-y", "127.0.0.1:30912", {"Y": 1}, crc=12345)
            resp = await broker.invoke(ns, bad)
            assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "crc32 not match"
            assert await route(client, ns, "Y") is None

            corrupt = register_request("broker-y", "127.0.0.1:30912", {"Y": 1}, compressed=True, crc=0)
            corrupt.body = b"not zlib at all"
            resp = await broker.invoke(ns, corrupt)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "register broker body" in (resp.remark or "")

            # a slave learns its master's address and HA address
            slave = register_request("broker-z", "127.0.0.1:30921", topics, broker_id=1, compressed=True)
            resp = await broker.invoke(ns, slave)
            assert resp.code == 0
            assert resp.ext_fields["masterAddr"] == "127.0.0.1:30911"
            assert resp.ext_fields["haServerAddr"] == "127.0.0.1:130911"
            r = await route(client, ns, "T7")
            assert r is not None and r.broker_datas[0].broker_addrs == {
                0: "127.0.0.1:30911",
                1: "127.0.0.1:30921",
            }

            # QUERY_DATA_VERSION: unchanged for the registered version, changed for another one
            q = {"brokerName": "broker-z", "brokerAddr": "127.0.0.1:30911", "clusterName": "DefaultCluster"}
            q["brokerId"] = "0"
            same = DataVersion(1_700_000_000_000, 1).encode()
            resp = await broker.invoke(ns, RemotingCommand.request(C.QUERY_DATA_VERSION, q, same))
            assert (resp.code, resp.ext_fields["changed"]) == (0, "false")
            assert DataVersion.decode(resp.body) == DataVersion(1_700_000_000_000, 1)
            other = DataVersion(1_700_000_000_000, 2).encode()
            resp = await broker.invoke(ns, RemotingCommand.request(C.QUERY_DATA_VERSION, q, other))
            assert resp.ext_fields["changed"] == "true"

    arun(body)


def test_cluster_topics_delete_and_write_perm(namesrv: RocketqProcess) -> None:
    ns = namesrv.addr

    async def body() -> None:
        async with RemotingClient() as b, RemotingClient() as c:
            await b.invoke(ns, register_request("ba", "127.0.0.1:40911", {"A": 4, "S": 4}, cluster="C1"))
            await b.invoke(ns, register_request("bb", "127.0.0.1:40912", {"B": 4, "S": 4}, cluster="C2"))

            resp = await c.invoke(ns, RemotingCommand.request(C.GET_BROKER_CLUSTER_INFO))
            info = ClusterInfo.decode(resp.body)
            assert info.cluster_addr_table == {"C1": {"ba"}, "C2": {"bb"}}
            assert info.broker_addr_table["bb"].broker_addrs == {0: "127.0.0.1:40912"}

            resp = await c.invoke(ns, RemotingCommand.request(C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            assert TopicList.decode(resp.body).topic_list == {"A", "B", "S"}
            resp = await c.invoke(ns, RemotingCommand.request(C.GET_TOPICS_BY_CLUSTER, {"cluster": "C1"}))
            assert TopicList.decode(resp.body).topic_list == {"A", "S"}

            resp = await c.invoke(
                ns, RemotingCommand.request(C.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "ba"})
            )
            assert (resp.code, resp.ext_fields["wipeTopicCount"]) == (0, "2")
            r = await route(c, ns, "S")
            assert r is not None
            assert {q.broker_name: q.perm for q in r.queue_datas} == {"ba": 4, "bb": 6}
            resp = await c.invoke(
                ns, RemotingCommand.request(C.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "ba"})
            )
            assert (resp.code, resp.ext_fields["addTopicCount"]) == (0, "2")
            r = await route(c, ns, "S")
            assert r is not None and {q.perm for q in r.queue_datas} == {6}

            req = RemotingCommand.request(C.DELETE_TOPIC_IN_NAMESRV, {"topic": "S", "clusterName": "C1"})
            assert (await c.invoke(ns, req)).code == 0
            r = await route(c, ns, "S")
            assert r is not None and [q.broker_name for q in r.queue_datas] == ["bb"]
            assert (
                await c.invoke(ns, RemotingCommand.request(C.DELETE_TOPIC_IN_NAMESRV, {"topic": "S"}))
            ).code == 0
            assert await route(c, ns, "S") is None

    arun(body)


def test_kv_config_order_topic_conf_and_persistence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = start_namesrv(home)
    port = proc.port

    def kv(code: int, **ext: str) -> RemotingCommand:
        return RemotingCommand.request(code, ext)

    async def first() -> None:
        async with RemotingClient() as c:
            ns = proc.addr
            assert (await c.invoke(ns, kv(C.PUT_KV_CONFIG, namespace="NS", key="k1", value="v1"))).code == 0
            assert (await c.invoke(ns, kv(C.PUT_KV_CONFIG, namespace="NS", key="k2", value="v2"))).code == 0
            req = kv(C.PUT_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="OT", value="broker-a:4")
            assert (await c.invoke(ns, req)).code == 0
            resp = await c.invoke(ns, kv(C.GET_KV_CONFIG, namespace="NS", key="k1"))
            assert (resp.code, resp.ext_fields["value"]) == (0, "v1")
            resp = await c.invoke(ns, kv(C.GET_KV_CONFIG, namespace="NS", key="nope"))
            assert resp.code == ResponseCode.QUERY_NOT_FOUND
            assert (await c.invoke(ns, kv(C.DELETE_KV_CONFIG, namespace="NS", key="k2"))).code == 0
            resp = await c.invoke(ns, kv(C.GET_KVLIST_BY_NAMESPACE, namespace="NS"))
            assert KVTable.decode(resp.body).table == {"k1": "v1"}
            resp = await c.invoke(ns, kv(C.GET_KVLIST_BY_NAMESPACE, namespace="EMPTY"))
            assert resp.code == ResponseCode.QUERY_NOT_FOUND
            # orderTopicConf rides along with the route; the register response carries the order table
            resp = await c.invoke(ns, register_request("broker-a", "127.0.0.1:10911", {"OT": 4}))
            assert KVTable.decode(resp.body).table == {"OT": "broker-a:4"}
            r = await route(c, ns, "OT")
            assert r is not None and r.order_topic_conf == "broker-a:4"
            # missing header fields are a clear error, not a crash
            resp = await c.invoke(ns, kv(C.PUT_KV_CONFIG, namespace="NS"))
            assert resp.code == ResponseCode.SYSTEM_ERROR and "key" in (resp.remark or "")

    try:
        arun(first)
    finally:
        assert proc.stop() == 0
    saved = orjson.loads((home / "namesrv" / "kvConfig.json").read_bytes())
    assert saved["configTable"]["NS"] == {"k1": "v1"}

    proc = start_namesrv(home, port=port)

    async def second() -> None:
        async with RemotingClient() as c:
            resp = await c.invoke(proc.addr, kv(C.GET_KV_CONFIG, namespace="NS", key="k1"))
            assert (resp.code, resp.ext_fields["value"]) == (0, "v1")
            resp = await c.invoke(proc.addr, kv(C.GET_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="OT"))
            assert resp.ext_fields["value"] == "broker-a:4"

    try:
        arun(second)
    finally:
        assert proc.stop(sig=signal.SIGINT) == 0


def test_untrusted_input_gets_errors_or_closed_connection(namesrv: RocketqProcess) -> None:
    ns = namesrv.addr
    # raw garbage on one connection
    with socket.create_connection(("127.0.0.1", namesrv.port), timeout=5) as s:
        s.sendall(struct.pack(">i", 0x7FFFFFFF) + b"junk")
        assert s.recv(100) == b""

    async def body() -> None:
        async with RemotingClient() as c:
            resp = await c.invoke(ns, RemotingCommand.request(C.REGISTER_BROKER, {"brokerName": "x"}))
            assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerAddr" in (resp.remark or "")
            bad = register_request("b", "not-an-addr", {"T": 1})
            assert (await c.invoke(ns, bad)).code == ResponseCode.SYSTEM_ERROR
            bad = register_request("b", "127.0.0.1:1", {"T": 1})
            bad.ext_fields["brokerId"] = "zero"
            assert (await c.invoke(ns, bad)).code == ResponseCode.SYSTEM_ERROR
            req = register_request("b", "127.0.0.1:1", {"T": 1}, crc=0)
            req.body = b'{"topicConfigSerializeWrapper": []}'
            assert (await c.invoke(ns, req)).code == ResponseCode.SYSTEM_ERROR
            assert (await c.invoke(ns, RemotingCommand.request(C.GET_ROUTEINFO_BY_TOPIC))).code == 1
            assert (
                await c.invoke(ns, RemotingCommand.request(9999))
            ).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            resp = await c.invoke(ns, route_request("x" * 300))
            assert resp.code == ResponseCode.SYSTEM_ERROR and "longer than" in (resp.remark or "")
            # still serving
            assert (await c.invoke(ns, RemotingCommand.request(C.GET_BROKER_CLUSTER_INFO))).code == 0

    arun(body)
    assert namesrv.alive()


def test_200_concurrent_clients(namesrv: RocketqProcess) -> None:
    ns = namesrv.addr

    async def body() -> None:
        async with RemotingClient() as broker:
            req = register_request("broker-a", "127.0.0.1:10911", {f"T{i}": 4 for i in range(20)})
            assert (await broker.invoke(ns, req)).code == 0
            clients = [RemotingClient() for _ in range(200)]
            try:

                async def work(i: int, c: RemotingClient) -> int:
                    ok = 0
                    for j in range(5):
                        r = await route(c, ns, f"T{(i + j) % 20}")
                        ok += r is not None and r.queue_datas[0].write_queue_nums == 4
                    resp = await c.invoke(ns, RemotingCommand.request(C.GET_BROKER_CLUSTER_INFO))
                    ok += resp.code == 0
                    return ok

                results = await asyncio.gather(*(work(i, c) for i, c in enumerate(clients)))
                assert results == [6] * 200
            finally:
                await asyncio.gather(*(c.close() for c in clients))

    arun(body)
    assert namesrv.alive()


def test_config_file_sets_port_kv_path_and_intervals(tmp_path: Path) -> None:
    from tests.helpers.procs import NAMESRV_BOOT_LINE, free_port, start_rocketq

    port = free_port()
    kv_path = tmp_path / "custom" / "kv.json"
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        f"# a comment\nlistenPort={port}\nkvConfigPath = {kv_path}\n"
        "brokerChannelExpiredTime=500\nscanNotActiveBrokerInterval=100\n"
    )
    proc = start_rocketq(["namesrv", "-c", str(conf)], boot_line=NAMESRV_BOOT_LINE, port=port)

    async def body() -> None:
        async with RemotingClient() as c:
            req = RemotingCommand.request(C.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
            assert (await c.invoke(proc.addr, req)).code == 0
            assert (await c.invoke(proc.addr, register_request("b", "127.0.0.1:1234", {"E": 1}))).code == 0
            assert await route(c, proc.addr, "E") is not None

            async def gone() -> bool:
                return await route(c, proc.addr, "E") is None

            await wait_until(gone, 3)  # 0.5 s expiry from the config file

    try:
        arun(body)
    finally:
        assert proc.stop() == 0
    assert orjson.loads(kv_path.read_bytes())["configTable"] == {"N": {"k": "v"}}


def test_port_in_use_fails_cleanly(namesrv: RocketqProcess, tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "namesrv", "-p", str(namesrv.port), "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 1
    assert "boot success" not in out.stdout


def test_namesrv_config_get_and_guarded_update(namesrv: RocketqProcess) -> None:
    ns = namesrv.addr

    async def body() -> None:
        async with RemotingClient() as c:
            resp = await c.invoke(ns, RemotingCommand.request(C.GET_NAMESRV_CONFIG))
            text = resp.body.decode()
            assert f"listenPort={namesrv.port}\n" in text and "orderMessageEnable=true" in text
            bad = RemotingCommand.request(C.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/etc/passwd\n")
            resp = await c.invoke(ns, bad)
            assert resp.code == ResponseCode.NO_PERMISSION and "kvConfigPath" in (resp.remark or "")
            put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "OT", "value": "b:4"}
            assert (await c.invoke(ns, RemotingCommand.request(C.PUT_KV_CONFIG, put))).code == 0
            await c.invoke(ns, register_request("b", "127.0.0.1:1234", {"OT": 4}))
            r = await route(c, ns, "OT")
            assert r is not None and r.order_topic_conf == "b:4"
            off = RemotingCommand.request(C.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=false\n")
            assert (await c.invoke(ns, off)).code == 0
            r = await route(c, ns, "OT")
            assert r is not None and r.order_topic_conf is None
            resp = await c.invoke(ns, RemotingCommand.request(C.GET_NAMESRV_CONFIG))
            assert "orderMessageEnable=false" in resp.body.decode()

    arun(body)


def test_rocketq_procs_fixture_starts_and_stops(rocketq_procs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers.procs import NAMESRV_BOOT_LINE

    proc = rocketq_procs(["namesrv", "-p", "{port}", "--home", str(tmp_path)], boot_line=NAMESRV_BOOT_LINE)
    with socket.create_connection(("127.0.0.1", proc.port), timeout=5):
        pass
    assert proc.alive() and NAMESRV_BOOT_LINE in proc.output
