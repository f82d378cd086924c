"""Delay levels, send-back -> %RETRY% -> %DLQ%, all through real broker processes (delay levels 1s 2s 3s)."""

from __future__ import annotations

import asyncio
import time

from tests.integration.broker_support import (
    cluster_fixture,
    create_topic,
    pull,
    records,
    run,
    send,
    start_cluster,
)

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

C = RequestCode
rq = RemotingCommand.request


cluster = cluster_fixture("broker-retry")


async def wait_messages(
    c: RemotingClient, addr: str, group: str, topic: str, qid: int, n: int, timeout: float
):
    deadline = time.monotonic() + timeout
    got = []
    offset = 0
    while time.monotonic() < deadline:
        p = await pull(c, addr, group, topic, qid, offset)
        if p.code == ResponseCode.SUCCESS:
            msgs = records(p)
            got += msgs
            offset = int(p.ext_fields["nextBeginOffset"])
            if len(got) >= n:
                return got
        await asyncio.sleep(0.05)
    return got


async def send_back(c, addr, offset: int, group: str, delay_level: int = 0, max_times: int = 16, origin=""):
    ext = {
        "offset": str(offset),
        "group": group,
        "delayLevel": str(delay_level),
        "originMsgId": origin,
        "originTopic": "",
        "unitMode": "false",
        "maxReconsumeTimes": str(max_times),
    }
    return await c.invoke(addr, rq(C.CONSUMER_SEND_MSG_BACK, ext), 5.0)


def test_delay_levels_arrive_after_their_delay(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "DL", 1)
            t0 = time.time()
            r1 = await send(c, addr, "DL", b"one", {"DELAY": "1"}, queue_id=0)
            r2 = await send(c, addr, "DL", b"two", {"DELAY": "2"}, queue_id=0)
            r9 = await send(c, addr, "DL", b"max", {"DELAY": "9"}, queue_id=0)  # clamped to level 3 (3s)
            assert r1.code == r2.code == r9.code == ResponseCode.SUCCESS
            p = await pull(c, addr, "CGDL", "DL", 0, 0)
            assert p.code == ResponseCode.PULL_NOT_FOUND  # nothing is visible before its time
            msgs = await wait_messages(c, addr, "CGDL", "DL", 0, 3, 10)
            assert [bytes(m.body) for m in msgs] == [b"one", b"two", b"max"]
            for m, delay in zip(msgs, (1.0, 2.0, 3.0), strict=True):
                lag = m.store_timestamp / 1000 - t0
                assert delay - 0.2 <= lag <= delay + 2.0, (bytes(m.body), lag)
                assert "DELAY" not in m.properties
                assert m.properties["REAL_TOPIC"] == "DL"

    run(go())


def test_send_back_retry_then_dlq(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "RB", 1)
            sent = await send(c, addr, "RB", b"fails", {"TAGS": "T1", "KEYS": "kk"}, queue_id=0)
            p = await pull(c, addr, "CGR", "RB", 0, 0)  # also auto-creates the group
            m = records(p)[0]
            t0 = time.time()
            r = await send_back(c, addr, m.commit_log_offset, "CGR", 0, 2, m.offset_msg_id)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # delay level 3 + reconsumeTimes(0) = level 3 -> 3s, then %RETRY%CGR
            retry = await wait_messages(c, addr, "CGR", "%RETRY%CGR", 0, 1, 10)
            assert len(retry) == 1
            rm = retry[0]
            assert rm.store_timestamp / 1000 - t0 >= 2.5
            assert bytes(rm.body) == b"fails"
            assert rm.reconsume_times == 1
            assert rm.properties["RETRY_TOPIC"] == "RB"
            assert rm.properties["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
            assert rm.properties["TAGS"] == "T1"
            # second failure (level 3 + 1 -> clamped 3): retry again with reconsumeTimes 2
            r = await send_back(c, addr, rm.commit_log_offset, "CGR", 0, 2)
            assert r.code == ResponseCode.SUCCESS
            retry2 = await wait_messages(c, addr, "CGR", "%RETRY%CGR", 0, 2, 10)
            rm2 = retry2[-1]
            assert rm2.reconsume_times == 2
            assert rm2.properties["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
            # third failure: reconsumeTimes 2 >= max 2 -> %DLQ%CGR at once
            r = await send_back(c, addr, rm2.commit_log_offset, "CGR", 0, 2)
            assert r.code == ResponseCode.SUCCESS
            dlq = await wait_messages(c, addr, "CGDLQ", "%DLQ%CGR", 0, 1, 3)
            assert len(dlq) == 1 and bytes(dlq[0].body) == b"fails"
            assert dlq[0].reconsume_times == 3
            assert dlq[0].properties["RETRY_TOPIC"] == "RB"
            topics = await c.invoke(addr, rq(C.GET_ALL_TOPIC_CONFIG, {}))
            import orjson

            table = orjson.loads(topics.body_bytes)["topicConfigTable"]
            assert table["%DLQ%CGR"]["readQueueNums"] == 1
            assert table["%RETRY%CGR"]["perm"] == 6
            # delayLevel < 0 -> DLQ directly
            r = await send_back(c, addr, m.commit_log_offset, "CGR", -1, 16)
            assert r.code == ResponseCode.SUCCESS
            dlq = await wait_messages(c, addr, "CGDLQ2", "%DLQ%CGR", 0, 2, 3)
            assert len(dlq) == 2 and dlq[1].reconsume_times == 1
            # unknown group / bad offset
            r = await send_back(c, addr, m.commit_log_offset, "NoSuchGroup", 0)
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            r = await send_back(c, addr, 10**12, "CGR", 0)
            assert r.code == ResponseCode.SYSTEM_ERROR

    run(go())


def test_client_resend_to_retry_topic_goes_to_dlq_past_max(cluster):
    """ali-ons' fallback: it sends to %RETRY%group itself with reconsumeTimes; past max -> DLQ."""
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await pull(c, addr, "CGF", "RB", 0, 0)  # creates the group
            r = await send(c, addr, "%RETRY%CGF", b"again", {"RETRY_TOPIC": "RB"}, queue_id=0, j="5", l="3")
            assert r.code == ResponseCode.SUCCESS, r.remark
            dlq = await wait_messages(c, addr, "CGX", "%DLQ%CGF", 0, 1, 3)
            assert [bytes(m.body) for m in dlq] == [b"again"]

    run(go())


def test_delay_survives_restart(tmp_path):
    cluster = start_cluster(tmp_path)
    try:
        addr = cluster.addr

        async def produce():
            async with RemotingClient() as c:
                await create_topic(c, addr, "DR", 1)
                r = await send(c, addr, "DR", b"later", {"DELAY": "3"}, queue_id=0)
                assert r.code == ResponseCode.SUCCESS

        t0 = time.time()
        run(produce())
        cluster.restart_broker()

        async def consume():
            async with RemotingClient() as c:
                return await wait_messages(c, cluster.addr, "CGDR", "DR", 0, 1, 15)

        msgs = run(consume())
        assert [bytes(m.body) for m in msgs] == [b"later"]
        assert msgs[0].store_timestamp / 1000 - t0 >= 2.8
        # delivered once, and the delay offset was persisted: a second restart does not redeliver
        cluster.restart_broker()
        time.sleep(1.5)

        async def again():
            async with RemotingClient() as c:
                p = await pull(c, cluster.addr, "CGDR2", "DR", 0, 0)
                return records(p) if p.code == ResponseCode.SUCCESS else []

        assert [bytes(m.body) for m in run(again())] == [b"later"]
    finally:
        cluster.stop()
