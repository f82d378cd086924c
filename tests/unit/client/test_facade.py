"""Synchronous facade plumbing and client-side validation (no broker needed)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import rocketq
from rocketq import aio
from rocketq.client import sync
from rocketq.client.instance import parse_namesrv
from rocketq.client.producer import check_topic


def test_public_names() -> None:
    for name in (
        "Message",
        "Producer",
        "SendStatus",
        "PushConsumer",
        "ConsumeResult",
        "LitePullConsumer",
        "MessageModel",
        "ConsumeFromWhere",
        "MessageQueue",
        "SendResult",
        "MQBrokerError",
        "MQClientError",
    ):
        assert hasattr(rocketq, name), name
        assert hasattr(aio, name), name
    assert rocketq.__version__
    assert {s.name for s in rocketq.SendStatus} == {
        "SEND_OK",
        "FLUSH_DISK_TIMEOUT",
        "FLUSH_SLAVE_TIMEOUT",
        "SLAVE_NOT_AVAILABLE",
    }
    with pytest.raises(AttributeError):
        rocketq.NoSuchThing  # noqa: B018


def test_background_loop_is_shared_and_guarded() -> None:
    loop1 = sync.background_loop()
    assert sync.background_loop() is loop1

    async def which() -> str:
        return threading.current_thread().name

    assert sync.run(which()) == "rocketq-client-loop"

    async def nested() -> None:
        async def inner() -> int:
            return 1

        sync.run(inner())  # a blocking call on the loop itself would deadlock: refused

    with pytest.raises(RuntimeError):
        sync.run(nested())
    fut = sync.submit(asyncio.sleep(0, result=5))
    assert fut.result(5) == 5


def test_producer_not_started_and_validation() -> None:
    p = rocketq.Producer("PG", namesrv="127.0.0.1:1")
    with pytest.raises(rocketq.MQClientError):
        p.send(rocketq.Message("T", b"x"))
    p.send_msg_timeout = 1234  # configuration goes to the core
    assert p._core.send_msg_timeout == 1234
    for _ in range(2):  # valid topics are remembered; an invalid one must fail every time, not only once
        for bad in ("", "a b", "x" * 128, "TBW102", "t/1", None, 5):
            with pytest.raises(rocketq.MQClientError):
                check_topic(bad)  # type: ignore[arg-type]
        check_topic("%RETRY%G_1-x|y")


def test_parse_namesrv() -> None:
    assert parse_namesrv("127.0.0.1:9876;127.0.0.2:9876") == ["127.0.0.1:9876", "127.0.0.2:9876"]
    assert parse_namesrv(["a:1", " b:2 "]) == ["a:1", "b:2"]
    with pytest.raises(rocketq.MQClientError):
        parse_namesrv(" ; ")


def test_send_to_unreachable_namesrv_fails_fast() -> None:
    with rocketq.Producer("PG_x", namesrv="127.0.0.1:1") as p, pytest.raises(rocketq.MQClientError):
        p.send(rocketq.Message("T", b"x"))
