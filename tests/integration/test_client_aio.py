"""rocketq.aio: the asyncio client with coroutine listeners, the shared client instance and a clean
unregister on shutdown. Real `rocketq standalone` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from tests.helpers.procs import RocketqProcess
from tests.interop.standalone import new_topic, start_standalone

from rocketq import aio
from rocketq.client.api import MQClientAPI
from rocketq.client.instance import ClientConfig
from rocketq.remoting import RemotingClient

FAST = ClientConfig(rebalance_interval=2.0, persist_consumer_offset_interval=1.0)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RocketqProcess, str]]:
    s = start_standalone(tmp_path_factory.mktemp("aio"))
    yield s.proc, s.broker
    s.stop()


def create_topic(namesrv: str, queues: int = 4) -> str:
    return new_topic(namesrv, queues, "A")


def test_async_producer_and_coroutine_listener(standalone: tuple[RocketqProcess, str]) -> None:
    proc, broker = standalone
    topic = create_topic(proc.addr)
    group = f"G_{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        received: list[aio.MessageExt] = []
        done = asyncio.Event()

        async def listener(msgs: list[aio.MessageExt]) -> aio.ConsumeResult:
            await asyncio.sleep(0)  # runs on the event loop
            received.extend(msgs)
            if len(received) >= 30:
                done.set()
            return aio.ConsumeResult.SUCCESS

        consumer = aio.PushConsumer(
            group,
            namesrv=proc.addr,
            consume_from_where=aio.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            client_config=FAST,
        )
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        async with aio.Producer("PG_aio", namesrv=proc.addr) as producer:
            await consumer.start()
            # one client instance per process: producer and consumer share it (same clientId, connections)
            assert producer.instance is consumer.instance
            results = await asyncio.gather(
                *(producer.send(aio.Message(topic, b"a%d" % i)) for i in range(10))
            )
            assert all(r.status is aio.SendStatus.SEND_OK for r in results)
            tasks = [producer.send_async(aio.Message(topic, b"b%d" % i)) for i in range(10)]
            assert all(r.status is aio.SendStatus.SEND_OK for r in await asyncio.gather(*tasks))
            r = await producer.send([aio.Message(topic, b"c%d" % i) for i in range(10)])
            assert len(r.msg_id.split(",")) == 10
            await asyncio.wait_for(done.wait(), 20)

            # the broker lists this client in the group while it runs ...
            api = MQClientAPI(RemotingClient(), [proc.addr])
            try:
                ids = await api.get_consumer_id_list(broker, group)
                assert ids == [consumer.client_id]
                await consumer.shutdown()
                # ... and forgets it at once after the clean UNREGISTER_CLIENT (Java answers
                # SYSTEM_ERROR "no consumer for this group" once the group is empty)
                try:
                    left = await api.get_consumer_id_list(broker, group)
                except aio.MQBrokerError as exc:
                    assert exc.code == 1
                    left = []
                assert left == []
            finally:
                await api.remoting.close()
        assert sorted(m.body for m in received) == sorted(
            [b"a%d" % i for i in range(10)]
            + [b"b%d" % i for i in range(10)]
            + [b"c%d" % i for i in range(10)]
        )

    asyncio.run(main())


def test_async_listener_reconsume_later(standalone: tuple[RocketqProcess, str]) -> None:
    proc, _ = standalone
    topic = create_topic(proc.addr, queues=1)

    async def main() -> list[int]:
        seen: list[int] = []
        done = asyncio.Event()

        async def listener(msgs: list[aio.MessageExt]) -> aio.ConsumeResult:
            seen.append(msgs[0].reconsume_times)
            if len(seen) < 2:
                return aio.ConsumeResult.RECONSUME_LATER
            done.set()
            return aio.ConsumeResult.SUCCESS

        c = aio.PushConsumer(
            f"G_{uuid.uuid4().hex[:8]}",
            namesrv=proc.addr,
            consume_from_where=aio.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            client_config=FAST,
        )
        c.subscribe(topic)
        c.register_listener(listener)
        async with c, aio.Producer("PG_aio2", namesrv=proc.addr) as p:
            await p.send(aio.Message(topic, b"again"))
            # default delay levels: the first retry is level 3 = 10 s
            await asyncio.wait_for(done.wait(), 25)
        return seen

    assert asyncio.run(main()) == [0, 1]
