"""Producer(auto_batch=True), RocketMQ 5's autoBatch: concurrent single sends travel as SEND_BATCH_MESSAGE
requests and every caller gets its own result. Real `rocketq standalone` on 127.0.0.1; the requests on the
wire are read from the producer's own remoting client."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.interop.standalone import Standalone, new_topic, start_standalone

from rocketq import aio
from rocketq.admin.client import AdminClient
from rocketq.client.instance import ClientConfig
from rocketq.protocol.codes import RequestCode

FAST = ClientConfig(rebalance_interval=1.0, persist_consumer_offset_interval=1.0)


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    s = start_standalone(tmp_path_factory.mktemp("autobatch"))
    yield s
    s.stop()


def create_topic(namesrv: str) -> str:
    return new_topic(namesrv, 2, "AB")


def record_requests(producer: aio.Producer) -> list[tuple[int, int]]:
    """(request code, body length) of every request the producer's connection sends from now on."""
    seen: list[tuple[int, int]] = []
    remoting = producer.instance.remoting
    invoke = remoting.invoke

    async def spy(addr: str, request: Any, timeout: float) -> Any:
        seen.append((request.code, len(request.body)))
        return await invoke(addr, request, timeout)

    remoting.invoke = spy  # type: ignore[method-assign]
    return seen


async def consume(namesrv: str, topic: str, expression: str, want: int, timeout: float = 30) -> list[Any]:
    got: list[Any] = []
    done = asyncio.Event()

    async def listener(msgs: list[aio.MessageExt]) -> aio.ConsumeResult:
        got.extend(msgs)
        if len(got) >= want:
            done.set()
        return aio.ConsumeResult.SUCCESS

    c = aio.PushConsumer(
        f"G_{uuid.uuid4().hex[:8]}",
        namesrv=namesrv,
        consume_from_where=aio.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        client_config=FAST,
    )
    c.subscribe(topic, expression)
    c.register_listener(listener)
    await c.start()
    try:
        await asyncio.wait_for(done.wait(), timeout)
        await asyncio.sleep(0.5)  # anything beyond `want` would show up now
    finally:
        await c.shutdown()
    return got


def test_concurrent_sends_share_batch_requests_and_keep_their_own_results(sa: Standalone) -> None:
    topic = create_topic(sa.namesrv)

    async def main() -> None:
        async with aio.Producer(f"PG_{uuid.uuid4().hex[:6]}", namesrv=sa.namesrv, auto_batch=True) as p:
            await p.send(aio.Message(topic, b"warm"))  # route and connection first
            seen = record_requests(p)
            msgs = [
                aio.Message(
                    topic,
                    b"body-%03d" % i,
                    tags="TagA" if i % 2 else "TagB",
                    keys=[f"K{i}", f"order-{i // 10}"],
                    properties={"seq": str(i)},
                )
                for i in range(60)
            ]
            results = await asyncio.gather(*(p.send(m) for m in msgs))

            codes = [c for c, _ in seen]
            batches = codes.count(RequestCode.SEND_BATCH_MESSAGE)
            # one gather: the sends leave in a few batch requests, not one request each
            assert 1 <= batches <= 6 and len(codes) <= 12, codes
            assert all(r.status is aio.SendStatus.SEND_OK for r in results)
            # each caller got its own message id (its UNIQ_KEY), offset id and queue offset
            assert [r.msg_id for r in results] == [m.properties["UNIQ_KEY"] for m in msgs]
            assert len({r.msg_id for r in results}) == len({r.offset_msg_id for r in results}) == 60
            slots = {(r.queue.queue_id, r.queue_offset) for r in results}
            assert len(slots) == 60

            async with AdminClient(sa.namesrv) as admin:
                for i in (0, 7, 31, 59):  # the offset id points at that very message
                    stored = await admin.view_message(results[i].offset_msg_id)
                    assert stored.body == b"body-%03d" % i
                    assert stored.properties["seq"] == str(i)
                    assert stored.properties["UNIQ_KEY"] == results[i].msg_id
                    assert (stored.queue_id, stored.queue_offset) == (
                        results[i].queue.queue_id,
                        results[i].queue_offset,
                    )
                # per-message keys reached the index through the batch
                deadline = time.monotonic() + 10
                while True:
                    found = await admin.query_message(topic, "K42")
                    if found or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.2)
                assert [m.body for m in found] == [b"body-042"]

        # tags travelled per message: a TagA subscription gets exactly the odd ones, at their offsets
        got = await consume(sa.namesrv, topic, "TagA", 30)
        by_body = {m.body: m for m in got}
        assert sorted(by_body) == sorted(b"body-%03d" % i for i in range(1, 60, 2))
        for i in range(1, 60, 2):
            m = by_body[b"body-%03d" % i]
            assert m.tags == "TagA" and m.keys == [f"K{i}", f"order-{i // 10}"]
            assert (m.queue_id, m.queue_offset, m.msg_id) == (
                results[i].queue.queue_id,
                results[i].queue_offset,
                results[i].msg_id,
            )

    asyncio.run(main())


def test_what_cannot_be_batched_goes_alone_and_batches_respect_max_bytes(sa: Standalone) -> None:
    topic = create_topic(sa.namesrv)

    async def main() -> None:
        async with aio.Producer(
            f"PG_{uuid.uuid4().hex[:6]}", namesrv=sa.namesrv, auto_batch=True, batch_max_bytes=3000
        ) as p:
            await p.send(aio.Message(topic, b"warm"))
            seen = record_requests(p)
            big = await p.send(aio.Message(topic, b"z" * 8192))  # compressed: never batched
            delayed = p.send(aio.Message(topic, b"later", delay_level=1))
            ordered = p.send(aio.Message(topic, b"ordered"), selector=lambda qs, m, a: qs[0])
            r_delayed, r_ordered = await asyncio.gather(delayed, ordered)
            assert all(r.status is aio.SendStatus.SEND_OK for r in (big, r_delayed, r_ordered))
            assert r_ordered.queue.queue_id == 0
            assert [c for c, _ in seen] == [RequestCode.SEND_MESSAGE_V2] * 3
            seen.clear()
            # 1 KiB bodies against 3000 bytes per batch: at most two messages per request
            results = await asyncio.gather(*(p.send(aio.Message(topic, bytes(1024))) for _ in range(20)))
            assert all(r.status is aio.SendStatus.SEND_OK for r in results)
            assert all(n <= 3000 for c, n in seen if c == RequestCode.SEND_BATCH_MESSAGE), seen
            assert len(seen) >= 10 and RequestCode.SEND_BATCH_MESSAGE in {c for c, _ in seen}, seen

            # switched off at run time: single requests again
            p.auto_batch = False
            seen.clear()
            await asyncio.gather(*(p.send(aio.Message(topic, b"x")) for _ in range(5)))
            assert [c for c, _ in seen] == [RequestCode.SEND_MESSAGE_V2] * 5

    asyncio.run(main())


def test_a_failed_batch_fails_every_caller(sa: Standalone) -> None:
    topic = create_topic(sa.namesrv)

    async def main() -> None:
        async with aio.Producer(f"PG_{uuid.uuid4().hex[:6]}", namesrv=sa.namesrv, auto_batch=True) as p:
            await p.send(aio.Message(topic, b"warm"))
            nowhere = aio.MessageQueue(topic, "no-such-broker", 0)
            outcomes = await asyncio.gather(
                *(p.send(aio.Message(topic, b"m%d" % i), queue=nowhere, timeout=2000) for i in range(5)),
                return_exceptions=True,
            )
            assert all(isinstance(o, aio.MQClientError) for o in outcomes), outcomes
            # the producer still works, and the accumulator holds nothing of the failed batch
            assert (await p.send(aio.Message(topic, b"after"))).status is aio.SendStatus.SEND_OK
            assert p._accumulator is not None and p._accumulator.held_bytes == 0

    asyncio.run(main())


def test_shutdown_sends_what_is_still_held(sa: Standalone) -> None:
    topic = create_topic(sa.namesrv)

    async def main() -> None:
        p = aio.Producer(
            f"PG_{uuid.uuid4().hex[:6]}", namesrv=sa.namesrv, auto_batch=True, batch_max_delay_ms=30_000
        )
        await p.start()
        await p.send(aio.Message(topic, b"warm", delay_level=1))  # alone: route and connection
        tasks = [asyncio.ensure_future(p.send(aio.Message(topic, b"held-%d" % i))) for i in range(4)]
        await asyncio.sleep(0.3)
        assert not any(t.done() for t in tasks)  # held for up to 30 s ...
        t0 = time.monotonic()
        await p.shutdown()  # ... unless the producer shuts down
        assert time.monotonic() - t0 < 10
        results = [t.result() for t in tasks]
        assert all(r.status is aio.SendStatus.SEND_OK for r in results)
        got = await consume(sa.namesrv, topic, "*", 4)
        assert sorted(m.body for m in got if m.body.startswith(b"held")) == [b"held-%d" % i for i in range(4)]

    asyncio.run(main())


def test_settings_are_checked() -> None:
    for kwargs in (
        {"batch_max_bytes": 0},
        {"batch_max_bytes": 2 * 1024 * 1024 + 1},
        {"batch_max_delay_ms": -1},
        {"batch_max_delay_ms": 30_001},
        {"total_batch_max_bytes": 0},
    ):
        with pytest.raises(ValueError):
            aio.Producer("PG", namesrv="127.0.0.1:1", auto_batch=True, **kwargs)
    p = aio.Producer("PG", namesrv="127.0.0.1:1")
    assert not p.auto_batch and p.batch_max_bytes == 32 * 1024 and p.batch_max_delay_ms == 0
    p.auto_batch = True
    p.batch_max_bytes = 4096
    assert p.auto_batch and p._accumulator is not None and p._accumulator.max_bytes == 4096
    with pytest.raises(ValueError):
        p.batch_max_delay_ms = 40_000


def test_switching_off_from_the_sync_facade_sends_what_is_held(sa: Standalone) -> None:
    import rocketq

    topic = create_topic(sa.namesrv)
    with rocketq.Producer(
        f"PG_{uuid.uuid4().hex[:6]}", namesrv=sa.namesrv, auto_batch=True, batch_max_delay_ms=30_000
    ) as p:
        p.send(rocketq.Message(topic, b"warm", delay_level=1))  # alone: route and connection
        futures = [p.send_async(rocketq.Message(topic, b"held-%d" % i)) for i in range(3)]
        time.sleep(0.3)
        assert not any(f.done() for f in futures)  # held by the 30 s delay
        t0 = time.monotonic()
        p.auto_batch = False  # from this thread, not the client's loop: handed to the loop
        results = [f.result(timeout=10) for f in futures]
        assert time.monotonic() - t0 < 10
        assert all(r.status is rocketq.SendStatus.SEND_OK for r in results)
        assert len({r.queue_offset for r in results}) == 3
        assert not p.auto_batch
