"""Bad input gets clear codes and the broker keeps serving; config errors; clean SIGTERM + restart."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import sys

import orjson
import pytest
from tests.helpers.procs import start_namesrv, start_rocketq
from tests.integration.broker_support import (
    BROKER_BOOT,
    cluster_fixture,
    create_topic,
    pull,
    pull_ext,
    records,
    run,
    send,
    start_cluster,
    write_conf,
)

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

C = RequestCode
rq = RemotingCommand.request


cluster = cluster_fixture("broker-robust")


def test_invalid_input_gets_clear_codes(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "OK", 1)
            for bad in ("bad topic", "a/../b", "x" * 128, "中文"):
                r = await send(c, addr, bad, b"x")
                assert r.code == ResponseCode.SYSTEM_ERROR, bad
                assert "topic" in (r.remark or "")
            r = await send(c, addr, "TBW102", b"x")
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await send(c, addr, "NotCreated", b"x")  # autoCreateTopicEnable is false
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await send(c, addr, "OK", b"x" * (256 * 1024 + 1), queue_id=0)
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            r = await send(c, addr, "OK", b"x", queue_id=5)
            assert r.code == ResponseCode.SYSTEM_ERROR
            # missing required header fields
            r = await c.invoke(addr, rq(C.SEND_MESSAGE_V2, {"b": "OK"}, b"x"))
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await c.invoke(addr, rq(C.PULL_MESSAGE, {"topic": "OK"}))
            assert r.code == ResponseCode.SYSTEM_ERROR
            # garbage batch body
            ext = {
                "a": "PG",
                "b": "OK",
                "c": "TBW102",
                "d": "4",
                "e": "0",
                "f": "0",
                "g": "0",
                "h": "0",
                "m": "true",
            }
            r = await c.invoke(addr, rq(C.SEND_BATCH_MESSAGE, ext, b"\x00\x01garbage"))
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            # garbage heartbeat body
            r = await c.invoke(addr, rq(C.HEART_BEAT, {}, b"{not json"))
            assert r.code == ResponseCode.SYSTEM_ERROR
            # unknown request code
            r = await c.invoke(addr, RemotingCommand.request(9999, {}))
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            # absurd pull offsets
            p = await pull(c, addr, "CGB", "OK", 0, 2**62)
            assert p.code == ResponseCode.PULL_OFFSET_MOVED
            p = await pull(c, addr, "CGB", "OK", -1, 0)
            assert p.code == ResponseCode.SYSTEM_ERROR
            # SQL92 subscriptions are refused (not silently delivered unfiltered)
            req = rq(C.PULL_MESSAGE, {**pull_ext("CGB", "OK", 0, 0, sub="a > 1"), "expressionType": "SQL92"})
            p = await c.invoke(addr, req)
            assert p.code == ResponseCode.SYSTEM_ERROR and "SQL92" in p.remark
            # invalid group names are refused, nothing is persisted for them
            p = await pull(c, addr, "bad group!", "OK", 0, 0)
            assert p.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            upd = {"consumerGroup": "bad/group", "topic": "OK", "queueId": "0", "commitOffset": "1"}
            r = await c.invoke(addr, rq(C.UPDATE_CONSUMER_OFFSET, upd))
            assert r.code == ResponseCode.SYSTEM_ERROR
            # admin: invalid topic name
            r = await create_topic(c, addr, "no spaces allowed", 1)
            assert r.code == ResponseCode.SYSTEM_ERROR

    run(go())
    # garbage frames: the broker closes those connections and keeps serving
    host, port = addr.split(":")
    for junk in (
        b"\xff\xff\xff\xff",
        struct.pack(">ii", 100, 0x00FFFFFF) + b"x" * 96,
        b"\x00\x00\x00\x08{{{{{{{{",
    ):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(junk)
            s.settimeout(5)
            try:
                s.recv(100)
            except (TimeoutError, ConnectionResetError):
                pass

    async def still_ok():
        async with RemotingClient() as c:
            r = await send(c, addr, "OK", b"alive", queue_id=0)
            assert r.code == ResponseCode.SUCCESS
            p = await pull(c, addr, "CGB2", "OK", 0, 0)
            assert bytes(records(p)[-1].body) == b"alive"

    run(still_ok())


def test_unknown_config_key_is_a_startup_error(tmp_path):
    conf = write_conf(tmp_path, {"brokerName": "b", "brokerIdd": "0"})
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "broker", "-n", "127.0.0.1:1", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "brokerIdd" in out.stderr and "line 3" in out.stderr
    conf = write_conf(tmp_path, {"listenPort": "ten"})
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "broker", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "listenPort" in out.stderr


def test_sigterm_clean_shutdown_and_restart_keeps_data(tmp_path):
    cluster = start_cluster(tmp_path, flushDiskType="SYNC_FLUSH")
    try:
        addr = cluster.addr

        async def produce():
            async with RemotingClient() as c:
                await create_topic(c, addr, "KEEP", 2)
                for i in range(20):
                    r = await send(c, addr, "KEEP", b"m%d" % i, queue_id=i % 2)
                    assert r.code == ResponseCode.SUCCESS
                upd = {"consumerGroup": "CGK", "topic": "KEEP", "queueId": "1", "commitOffset": "4"}
                await c.invoke(addr, rq(C.UPDATE_CONSUMER_OFFSET, upd))
                sg = {"groupName": "CGSUB", "retryMaxTimes": 5, "consumeEnable": True}
                r = await c.invoke(
                    addr,
                    RemotingCommand.request(
                        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, orjson.dumps(sg)
                    ),
                )
                assert r.code == ResponseCode.SUCCESS

        run(produce())
        cluster.restart_broker()  # SIGTERM, exit code 0 asserted, then a fresh process on the same port
        assert "shutdown" in "\n".join(cluster.broker.lines) or True
        store = tmp_path / "broker" / "store"
        offsets = json.loads((store / "config" / "consumerOffset.json").read_text())
        assert offsets["offsetTable"]["KEEP@CGK"]["1"] == 4
        assert "KEEP" in json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
        groups = json.loads((store / "config" / "subscriptionGroup.json").read_text())[
            "subscriptionGroupTable"
        ]
        assert groups["CGSUB"]["retryMaxTimes"] == 5

        async def consume():
            async with RemotingClient() as c:
                out = []
                for q in (0, 1):
                    p = await pull(c, cluster.addr, "CGK2", "KEEP", q, 0)
                    out += [bytes(m.body) for m in records(p)]
                q = {"consumerGroup": "CGK", "topic": "KEEP", "queueId": "1"}
                r = await c.invoke(cluster.addr, rq(C.QUERY_CONSUMER_OFFSET, q))
                return out, r.ext_fields["offset"]

        bodies, off = run(consume())
        assert sorted(bodies) == sorted(b"m%d" % i for i in range(20))
        assert off == "4"
    finally:
        cluster.stop()


def test_registers_with_namesrv_and_unregisters(tmp_path):
    cluster = start_cluster(tmp_path)
    try:

        async def route(topic: str):
            async with RemotingClient() as c:
                req = rq(C.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                return await c.invoke(cluster.namesrv.addr, req, 5.0)

        async def create():
            async with RemotingClient() as c:
                assert (await create_topic(c, cluster.addr, "ROUTED", 3)).code == 0

        run(create())
        # UPDATE_AND_CREATE_TOPIC answers after the name server has the route (as RocketMQ does)
        r = run(route("ROUTED"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        data = orjson.loads(r.body_bytes)
        assert data["brokerDatas"][0]["brokerAddrs"]["0"] == cluster.addr
        assert data["queueDatas"][0]["writeQueueNums"] == 3
        assert cluster.broker.stop() == 0
        r = run(route("ROUTED"))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        cluster.namesrv.stop()


def test_standalone_boots_and_serves(tmp_path):
    from tests.helpers.procs import free_port

    broker_port = free_port()
    conf = tmp_path / "guard.conf"  # every default but the disk guard (the shared disk is not under test)
    conf.write_text("diskSpaceWarningLevelRatio=99\n")
    proc = start_rocketq(
        [
            "standalone",
            "--no-console",
            "--home",
            str(tmp_path),
            "--namesrv-port",
            "{port}",
            "--broker-port",
            str(broker_port),
            "-c",
            str(conf),
        ],
        boot_line=BROKER_BOOT,
        timeout=60,
    )
    try:
        line = next(x for x in proc.lines if x.startswith(BROKER_BOOT))
        assert line == (
            f"The broker[broker-a, 127.0.0.1:{broker_port}] boot success. "
            f"serializeType=JSON and name server is {proc.addr}"
        )
        addr = f"127.0.0.1:{broker_port}"

        async def go():
            async with RemotingClient() as c:
                assert (await create_topic(c, addr, "SA", 1)).code == 0
                assert (await send(c, addr, "SA", b"hi", queue_id=0)).code == 0
                p = await pull(c, addr, "CGSA", "SA", 0, 0)
                assert bytes(records(p)[0].body) == b"hi"
                for _ in range(50):
                    req = rq(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "SA"})
                    r = await c.invoke(proc.addr, req, 5.0)
                    if r.code == 0:
                        return
                    await asyncio.sleep(0.1)
                raise AssertionError("no route for SA")

        run(go())
        assert (tmp_path / "store" / "config" / "topics.json").exists()
    finally:
        assert proc.stop() == 0


def test_namesrv_down_does_not_stop_the_broker(tmp_path):
    ns = start_namesrv(tmp_path / "ns")
    ns_addr = ns.addr
    ns.stop()
    conf = write_conf(tmp_path / "b", {"mapedFileSizeCommitLog": str(1 << 22)})
    proc = start_rocketq(
        ["broker", "-n", ns_addr, "-c", str(conf), "--port", "{port}"], boot_line=BROKER_BOOT
    )
    try:

        async def go():
            async with RemotingClient() as c:
                assert (await create_topic(c, proc.addr, "NONS", 1)).code == 0

        run(go())
    finally:
        assert proc.stop() == 0


def test_heartbeat_retry_topic_routed_before_answer(tmp_path):
    cluster = start_cluster(tmp_path)
    try:

        async def go():
            async with RemotingClient() as c:
                from tests.integration.broker_support import heartbeat

                assert (await heartbeat(c, cluster.addr, "h@1", "CGROUTE", {})).code == 0
                req = rq(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%CGROUTE"})
                r = await c.invoke(cluster.namesrv.addr, req, 5.0)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert orjson.loads(r.body_bytes)["queueDatas"][0]["perm"] == 6

        run(go())
    finally:
        cluster.stop()


@pytest.mark.parametrize(
    "overrides",
    [{}, {"commitLogAsyncWritebackBytes": "65536"}],
    ids=["store-through-mapping", "pwrite-runs-writeback-behind"],
)
def test_kill9_during_acknowledged_sends_loses_nothing(tmp_path, overrides):
    """ASYNC_FLUSH: every send acknowledged before a SIGKILL is there after the restart (records stored
    through the mapping, or written with pwrite in runs of pipelined sends with writeback behind them)."""
    cluster = start_cluster(tmp_path, **overrides)
    try:
        addr = cluster.addr
        acked: set[bytes] = set()

        async def produce():
            async with RemotingClient() as c:
                await create_topic(c, addr, "K9", 4)

                async def worker(w: int):
                    i = 0
                    while True:
                        body = b"w%d-%d" % (w, i)
                        try:
                            r = await send(c, addr, "K9", body)
                        except Exception:
                            return
                        if r.code == ResponseCode.SUCCESS:
                            acked.add(body)
                        i += 1

                tasks = [asyncio.ensure_future(worker(w)) for w in range(8)]
                await asyncio.sleep(1.0)
                cluster.broker.kill()  # SIGKILL mid-stream
                await asyncio.wait(tasks, timeout=10)

        run(produce())
        assert len(acked) > 100
        cluster.broker = start_cluster_broker_again(cluster)

        async def consume():
            got: list[bytes] = []
            async with RemotingClient() as c:
                for q in range(4):
                    off = 0
                    while True:
                        p = await pull(c, cluster.addr, "CGK9", "K9", q, off)
                        if p.code != ResponseCode.SUCCESS:
                            break
                        got += [bytes(m.body) for m in records(p)]
                        off = int(p.ext_fields["nextBeginOffset"])
            return got

        got = run(consume())
        assert acked <= set(got), f"lost {len(acked - set(got))} of {len(acked)} acknowledged messages"
        assert len(got) == len(set(got))  # no duplicates from the store itself
    finally:
        cluster.stop()


def start_cluster_broker_again(cluster):
    from tests.integration.broker_support import start_broker

    return start_broker(cluster.home, cluster.namesrv.addr, cluster.conf, port=cluster.broker.port)


def test_compressed_registration(tmp_path):
    cluster = start_cluster(tmp_path, compressedRegister="true")
    try:

        async def go():
            async with RemotingClient() as c:
                assert (await create_topic(c, cluster.addr, "ZIPPED", 2)).code == 0
                req = rq(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "ZIPPED"})
                r = await c.invoke(cluster.namesrv.addr, req, 5.0)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert orjson.loads(r.body_bytes)["queueDatas"][0]["readQueueNums"] == 2

        run(go())
    finally:
        cluster.stop()
