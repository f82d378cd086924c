"""A byte flipped in a stored message body (issue 33, item 3), against real broker processes and rocketq's
PushConsumer: the broker never serves the record (and counts it), the client checks the CRC too, and no other
acknowledged message is lost (a clean restart used to cut the CommitLog at the damaged record and zero the
acknowledged messages after it)."""

from __future__ import annotations

import asyncio
import glob
import uuid
from pathlib import Path

import orjson
from tests.integration.broker_support import call, create_topic, run, send, start_cluster

from rocketq import aio
from rocketq.client.instance import ClientConfig
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.remoting import RemotingClient

N = 8
VICTIM = 3


def flip_body_byte(store: Path, body: bytes) -> None:
    """Flip one byte inside the stored body (the broker is stopped)."""
    for segment in sorted(glob.glob(str(store / "commitlog" / "0*"))):
        data = Path(segment).read_bytes()
        if body in data:
            at = data.index(body) + len(body) // 2
            with open(segment, "r+b") as f:
                f.seek(at)
                f.write(bytes([data[at] ^ 0x20]))
            return
    raise AssertionError("body not found in the CommitLog")


async def consume(namesrv: str, topic: str, check_crc: bool, expect: int) -> tuple[list[bytes], int]:
    got: list[bytes] = []
    done = asyncio.Event()

    async def listener(msgs: list[aio.MessageExt]) -> aio.ConsumeResult:
        got.extend(m.body for m in msgs)
        if len(got) >= expect:
            done.set()
        return aio.ConsumeResult.SUCCESS

    consumer = aio.PushConsumer(
        f"G_{uuid.uuid4().hex[:8]}",
        namesrv=namesrv,
        consume_from_where=aio.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        client_config=ClientConfig(rebalance_interval=1.0, check_crc=check_crc),
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), 30)
        await asyncio.sleep(0.5)  # anything else that would arrive (the corrupt one) has time to
    finally:
        await consumer.shutdown()
    return got, consumer.corrupt_messages


async def runtime_info(addr: str) -> dict[str, str]:
    r = await call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    return orjson.loads(r.body_bytes)["table"]


def test_a_flipped_body_byte_is_never_delivered_and_nothing_else_is_lost(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, checkCRCOnRead="false")
    try:
        topic = "CrcTopic"
        bodies = [f"message-{i}-{'x' * 40}".encode() for i in range(N)]

        async def produce() -> None:
            async with RemotingClient() as c:
                assert (await create_topic(c, cluster.addr, topic, 1)).code == ResponseCode.SUCCESS
                for b in bodies:
                    assert (await send(c, cluster.addr, topic, b, queue_id=0)).code == ResponseCode.SUCCESS

        run(produce())
        assert cluster.broker.stop() == 0
        flip_body_byte(cluster.home / "store", bodies[VICTIM])
        expected = bodies[:VICTIM] + bodies[VICTIM + 1 :]

        # the broker's read check off: the record is served, the PushConsumer's CRC check leaves it out
        cluster.restart_broker()
        got, corrupt = run(consume(cluster.namesrv.addr, topic, True, N - 1))
        assert got == expected and corrupt == 1
        info = run(runtime_info(cluster.addr))
        assert info["bodyCrcMismatchRecovered"] == "1"  # recovery kept the log going past it

        # the broker's check on (the default): a consumer that does not check never sees the record either
        cluster.conf["checkCRCOnRead"] = "true"
        cluster.restart_broker()
        got, corrupt = run(consume(cluster.namesrv.addr, topic, False, N - 1))
        assert got == expected and corrupt == 0
        info = run(runtime_info(cluster.addr))
        assert int(info["bodyCrcMismatchSkipped"]) >= 1 and info["bodyCrcMismatchRecords"] == "1"
        assert "body does not match its CRC" in cluster.broker.output
    finally:
        cluster.stop()
