"""Transactional messages: half -> commit / rollback via END_TRANSACTION, and the check-back."""

from __future__ import annotations

import asyncio

import orjson
from tests.integration.broker_support import cluster_fixture, create_topic, pull, records, run, send

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

C = RequestCode
rq = RemotingCommand.request


cluster = cluster_fixture("broker-tx", transactionTimeOut="600", transactionCheckInterval="200")


async def send_half(c, addr, topic: str, body: bytes, uniq: str):
    props = {"TRAN_MSG": "true", "PGROUP": "TXPG", "UNIQ_KEY": uniq}
    return await send(c, addr, topic, body, props, queue_id=0, group="TXPG", f="4")


def end_ext(sent: RemotingCommand, uniq: str, kind: int, from_check: bool = False) -> dict:
    return {
        "producerGroup": "TXPG",
        "tranStateTableOffset": sent.ext_fields["queueOffset"],
        "commitLogOffset": str(int(sent.ext_fields["msgId"][16:], 16)),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": str(from_check).lower(),
        "msgId": uniq,
        "transactionId": uniq,
    }


async def bodies(c, addr, topic: str, group: str) -> list[bytes]:
    p = await pull(c, addr, group, topic, 0, 0)
    return [bytes(m.body) for m in records(p)] if p.code == ResponseCode.SUCCESS else []


def test_commit_and_rollback(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "TX", 1)
            s1 = await send_half(c, addr, "TX", b"commit-me", "U-1")
            s2 = await send_half(c, addr, "TX", b"roll-me", "U-2")
            assert s1.code == s2.code == ResponseCode.SUCCESS
            assert await bodies(c, addr, "TX", "G1") == []  # half messages are invisible
            # wrong producer group / wrong offsets are refused
            bad = {**end_ext(s1, "U-1", 8), "producerGroup": "OTHER"}
            r = await c.invoke(addr, rq(C.END_TRANSACTION, bad))
            assert r.code == ResponseCode.SYSTEM_ERROR
            bad = {**end_ext(s1, "U-1", 8), "tranStateTableOffset": "99"}
            r = await c.invoke(addr, rq(C.END_TRANSACTION, bad))
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await c.invoke(addr, rq(C.END_TRANSACTION, end_ext(s1, "U-1", 8)))
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await c.invoke(addr, rq(C.END_TRANSACTION, end_ext(s2, "U-2", 12)))
            assert r.code == ResponseCode.SUCCESS
            # committing twice stores once
            await c.invoke(addr, rq(C.END_TRANSACTION, end_ext(s1, "U-1", 8)))
            await asyncio.sleep(0.1)
            got = await bodies(c, addr, "TX", "G1")
            assert got == [b"commit-me"]
            m = records(await pull(c, addr, "G1", "TX", 0, 0))[0]
            assert "TRAN_MSG" not in m.properties and "REAL_TOPIC" not in m.properties
            # nothing is checked back for resolved halves
            await asyncio.sleep(1.0)
            assert await bodies(c, addr, "TX", "G1") == [b"commit-me"]

    run(go())


def test_check_back_commits(cluster):
    addr = cluster.addr

    async def go():
        checks = []
        async with RemotingClient() as c:

            def on_check(ch, req):
                checks.append(req)
                ext = {
                    "producerGroup": "TXPG",
                    "tranStateTableOffset": req.ext_fields["tranStateTableOffset"],
                    "commitLogOffset": req.ext_fields["commitLogOffset"],
                    "commitOrRollback": "8",
                    "fromTransactionCheck": "true",
                    "msgId": req.ext_fields.get("msgId", ""),
                }
                ch.invoke_oneway(rq(C.END_TRANSACTION, ext))

            c.register_processor(C.CHECK_TRANSACTION_STATE, on_check)
            await create_topic(c, addr, "TXC", 1)
            hb = {"clientID": "tx@1", "consumerDataSet": [], "producerDataSet": [{"groupName": "TXPG"}]}
            assert (await c.invoke(addr, rq(C.HEART_BEAT, {}, orjson.dumps(hb)))).code == 0
            s = await send_half(c, addr, "TXC", b"unknown-state", "U-3")
            assert s.code == ResponseCode.SUCCESS
            for _ in range(50):
                await asyncio.sleep(0.1)
                if await bodies(c, addr, "TXC", "G2"):
                    break
            assert await bodies(c, addr, "TXC", "G2") == [b"unknown-state"]
            assert len(checks) == 1
            m = records(checks[0])[0]
            assert m.topic == "TXC" and bytes(m.body) == b"unknown-state"
            await asyncio.sleep(1.0)
            assert len(checks) == 1

    run(go())


def test_batch_halves_are_not_checked_back(cluster):
    """Halves of a batch transaction (RQ_BATCH_TXN, the Spark sink) are resolved by END_TRANSACTION_BATCH,
    never by asking a producer; plain halves queued behind them are still checked."""
    addr = cluster.addr

    async def go():
        checks = []
        async with RemotingClient() as c:
            c.register_processor(C.CHECK_TRANSACTION_STATE, lambda ch, req: checks.append(req) or None)
            await create_topic(c, addr, "TXB", 1)
            hb = {"clientID": "txb@1", "consumerDataSet": [], "producerDataSet": [{"groupName": "TXPG"}]}
            assert (await c.invoke(addr, rq(C.HEART_BEAT, {}, orjson.dumps(hb)))).code == 0
            props = {"TRAN_MSG": "true", "PGROUP": "TXPG", "UNIQ_KEY": "B-1", "RQ_BATCH_TXN": "job-1"}
            b = await send(c, addr, "TXB", b"batch-half", props, queue_id=0, group="TXPG", f="4")
            p = await send_half(c, addr, "TXB", b"plain-half", "B-2")
            assert b.code == p.code == ResponseCode.SUCCESS
            for _ in range(40):
                await asyncio.sleep(0.1)
                if checks:
                    break
            await asyncio.sleep(0.5)
            checked = {records(x)[0].properties.get("UNIQ_KEY") for x in checks}
            assert checked == {"B-2"}
            body = orjson.dumps(
                {"halves": [[int(b.ext_fields["queueOffset"]), int(b.ext_fields["msgId"][16:], 16)]]}
            )
            ext = {"producerGroup": "TXPG", "transactionId": "job-1", "commitOrRollback": "8"}
            r = await c.invoke(addr, rq(10037, ext, body))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert await bodies(c, addr, "TXB", "GB") == [b"batch-half"]

    run(go())
