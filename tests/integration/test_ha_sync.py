"""SYNC_MASTER + SLAVE as real processes: the send statuses of the seed's sync double write, a byte-identical
CommitLog on the slave, the slave's refusal of sends, its copy of the master's metadata, and the HA status."""

from __future__ import annotations

import asyncio
import os
import signal

import orjson
import pytest
from tests.integration.ha_support import (
    commitlog_bytes,
    create_topic,
    ha_status,
    invoke,
    runtime_info,
    same_log,
    start_ha_cluster,
    wait_caught_up,
    wait_slave_attached,
    wait_until,
)
from tests.interop.standalone import mqadmin_ok, rows

from rocketq import Message, Producer, SendStatus
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand


@pytest.fixture
def cluster(tmp_path):
    c = start_ha_cluster(tmp_path)
    yield c
    c.close()


def send_many(producer: Producer, topic: str, n: int, tag: str) -> list:
    futures = [producer.send_async(Message(topic, f"{tag}-{i}".encode() * 20)) for i in range(n)]
    return [f.result(30) for f in futures]


def test_sync_master_statuses_and_a_byte_identical_slave(cluster):
    m = cluster.add("m", "broker-a", "SYNC_MASTER", slaveTimeout="1500")
    create_topic(m.addr, "HA_SYNC")
    with Producer("PG_ha_sync", namesrv=cluster.ns, send_msg_timeout=10_000) as p:
        # no slave: stored on the master, answered SLAVE_NOT_AVAILABLE
        r = p.send(Message("HA_SYNC", b"alone"))
        assert r.status is SendStatus.SLAVE_NOT_AVAILABLE
        s = cluster.add("s", "broker-a", "SLAVE", 1)
        wait_slave_attached(m)
        results = send_many(p, "HA_SYNC", 300, "attached")
        assert {r.status for r in results} == {SendStatus.SEND_OK}
        # the slave's acknowledgements stop (SIGSTOP): FLUSH_SLAVE_TIMEOUT after slaveTimeout, still stored
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            r = p.send(Message("HA_SYNC", b"slave paused"))
            assert r.status is SendStatus.FLUSH_SLAVE_TIMEOUT
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
        wait_until(
            lambda: p.send(Message("HA_SYNC", b"again")).status is SendStatus.SEND_OK, 30, "acks again"
        )

    end = wait_caught_up(m, s)
    st = ha_status(m.addr)
    assert st["master"] and st["inSyncSlaveNums"] == 1
    conn = st["haConnectionInfo"][0]
    assert conn["slaveAckOffset"] == end and conn["diff"] == 0 and conn["lagMillis"] == 0
    assert st["syncTimedOut"] >= 1 and st["slaveNotAvailable"] >= 1
    sst = ha_status(s.addr)
    assert not sst["master"] and sst["haClientRuntimeInfo"]["masterAddr"] == f"127.0.0.1:{m.ha_port}"
    assert sst["haClientRuntimeInfo"]["isActivated"] and sst["haClientRuntimeInfo"]["maxOffset"] == end
    assert runtime_info(m.addr)["brokerRole"] == "SYNC_MASTER"
    rs = runtime_info(s.addr)
    assert rs["brokerRole"] == "SLAVE" and rs["brokerId"] == "1" and rs["haState"] == "transfer"

    # a slave refuses sends
    ext = {"a": "PG", "b": "HA_SYNC", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0",
           "i": "", "j": "0", "k": "false", "m": "false"}  # fmt: skip
    resp = asyncio.run(invoke(s.addr, RequestCode.SEND_MESSAGE_V2, ext, b"x"))
    assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE

    # the slave copies the master's topics (it re-syncs as soon as it learns its master)
    def slave_has_topic() -> bool:
        r = asyncio.run(invoke(s.addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        return "HA_SYNC" in orjson.loads(r.body_bytes)["topicConfigTable"]

    wait_until(slave_has_topic, 20, "the topic on the slave")

    # byte-identical logs (the slave started empty while the master was in its first segment)
    assert cluster.stop("s") == 0 and cluster.stop("m") == 0
    assert len(commitlog_bytes(m).strip(b"\0")) > 300 * 100 and same_log(m, s)


def test_ha_status_admin_command(cluster):
    m = cluster.add("m", "broker-a", "ASYNC_MASTER")
    s = cluster.add("s", "broker-a", "SLAVE", 1)
    wait_slave_attached(m)
    out = mqadmin_ok(cluster.ns, "haStatus", "-b", m.addr)
    assert "#MasterAddr" in out and f"{m.addr}" in out and "#SlaveNum\t1" in out
    assert "OK" in out  # the slave is in sync
    out = mqadmin_ok(cluster.ns, "haStatus", "-b", s.addr)
    assert f"127.0.0.1:{m.ha_port}" in out and "#State\ttransfer" in out
    table = rows(mqadmin_ok(cluster.ns, "clusterList"))
    assert sorted((r["BID"], r["ROLE"]) for r in table) == [("0", "ASYNC_MASTER"), ("1", "SLAVE")]


def test_pull_from_the_slave_and_offsets_sent_with_pulls_are_not_stored_there(cluster):
    def pull(addr: str, commit: int) -> RemotingCommand:
        ext = {"consumerGroup": "CG_ha_pull", "topic": "HA_PULL", "queueId": "0", "queueOffset": "0",
               "maxMsgNums": "32", "sysFlag": str(0x1 | 0x4), "commitOffset": str(commit),
               "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
               "expressionType": "TAG"}  # fmt: skip
        return asyncio.run(invoke(addr, RequestCode.PULL_MESSAGE, ext))

    m = cluster.add("m", "broker-a", "ASYNC_MASTER")
    create_topic(m.addr, "HA_PULL", 1)
    s = cluster.add("s", "broker-a", "SLAVE", 1)  # learns the topic when it first meets its master
    wait_until(lambda: pull(s.addr, 0).code != ResponseCode.TOPIC_NOT_EXIST, 20, "the topic on the slave")
    with Producer("PG_ha_pull", namesrv=cluster.ns) as p:
        send_many(p, "HA_PULL", 10, "pull")
    wait_caught_up(m, s)

    r = pull(s.addr, 5)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "0"  # not lagging
    q = {"consumerGroup": "CG_ha_pull", "topic": "HA_PULL", "queueId": "0"}
    resp = asyncio.run(invoke(s.addr, RequestCode.QUERY_CONSUMER_OFFSET, q))
    assert resp.code != ResponseCode.SUCCESS or int(resp.ext_fields.get("offset", -1)) != 5
    # slaveReadEnable=false on a slave: no messages, back to the master
    node = cluster.nodes["s"]
    cluster.stop("s")
    node.conf["slaveReadEnable"] = "false"
    cluster.start("s")
    wait_caught_up(m, s)
    r = pull(s.addr, 0)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and not r.body
    assert r.ext_fields["suggestWhichBrokerId"] == "0"


def test_retry_another_broker_when_not_store_ok(cluster):
    a = cluster.add(
        "a", "broker-a", "SYNC_MASTER"
    )  # no slave: every send stored there is SLAVE_NOT_AVAILABLE
    b = cluster.add("b", "broker-b", "ASYNC_MASTER")
    for m in (a, b):
        create_topic(m.addr, "HA_RETRY", 2)
    with Producer("PG_ha_plain", namesrv=cluster.ns) as plain:
        got = {plain.send(Message("HA_RETRY", b"p%d" % i)).status for i in range(8)}
        assert got == {SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE}
    with Producer("PG_ha_retry", namesrv=cluster.ns, retry_another_broker_when_not_store_ok=True) as p:
        results = [p.send(Message("HA_RETRY", b"r%d" % i)) for i in range(8)]
        assert {r.status for r in results} == {SendStatus.SEND_OK}  # resent to broker-b
        assert {r.queue.broker_name for r in results} == {"broker-b"}
