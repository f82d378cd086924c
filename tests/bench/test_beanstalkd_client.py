"""The peers benchmark's beanstalkd client: its reply parser against fragmented and coalesced reads, and the
client against a real beanstalkd (put, fan-out tubes, reserve + delete, stats) when the binary is present."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.peers import install  # noqa: E402
from bench.peers.base import Membership  # noqa: E402
from bench.peers.sys_beanstalkd import BeanstalkdClient, BeanstalkdServer, _Conn  # noqa: E402


class _Sink:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


REPLIES = b"INSERTED 7\r\nRESERVED 9 5\r\nhe\r\no\r\nTIMED_OUT\r\nOK 3\r\na: \r\nDELETED\r\n"
EXPECTED = [
    (b"INSERTED 7", None),
    (b"RESERVED 9 5", b"he\r\no"),  # the body may contain CRLF: its length decides, not the line end
    (b"TIMED_OUT", None),
    (b"OK 3", b"a: "),
    (b"DELETED", None),
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, len(REPLIES)])
def test_replies_parse_across_any_read_boundaries(chunk: int) -> None:
    async def run() -> list[Any]:
        conn = _Conn()
        conn.connection_made(_Sink())
        first = conn.call(b"x", 2)
        second = conn.call(b"y", 3)
        for i in range(0, len(REPLIES), chunk):
            conn.data_received(REPLIES[i : i + chunk])
        assert not conn.buf  # everything consumed, nothing kept
        return [*(await first), *(await second)]

    assert asyncio.run(run()) == EXPECTED


def test_a_lost_connection_fails_the_waiting_calls() -> None:
    async def run() -> None:
        conn = _Conn()
        conn.connection_made(_Sink())
        fut = conn.call(b"put", 1)
        conn.data_received(b"INSERT")  # half a reply, then the server goes away
        conn.connection_lost(None)
        with pytest.raises(ConnectionResetError):
            await fut
        with pytest.raises(ConnectionResetError):
            await conn.call(b"put", 1)

    asyncio.run(run())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_client_against_a_real_beanstalkd(tmp_path: Path) -> None:
    if shutil.which("beanstalkd") is None:  # the harness's own installer, as the smoke test uses it
        problems = install.ensure_apt(timeout_s=600)
        if shutil.which("beanstalkd") is None:
            pytest.skip(f"beanstalkd could not be installed: {problems.get('beanstalkd')}")
    server = BeanstalkdServer("A", str(tmp_path / "b"), None)
    server.start()

    async def run() -> None:
        prod = BeanstalkdClient(server.client_args())
        cons = BeanstalkdClient(server.client_args())
        await prod.connect("producer")
        await cons.connect("consumer")
        await prod.prepare("plain")
        bodies = [b"m%d" % i for i in range(300)]
        await asyncio.gather(*(prod.publish("plain", b) for b in bodies))
        assert await cons.stored_count("plain") == 300
        got: list[bytes] = []
        await cons.subscribe("plain", "g", got.extend)
        for _ in range(100):
            if len(got) >= 300:
                break
            await asyncio.sleep(0.05)
        await cons.unsubscribe()
        assert sorted(got) == sorted(bodies)
        assert await cons.stored_count("plain") == 0  # every job delivered was deleted
        # fan-out: every group's tube gets every message, bodies beyond beanstalkd's default 64 KiB limit
        await prod.prepare("fan", groups=["g1", "g2"])
        big = bytes(range(256)) * 256  # 65,536 bytes, CRLF pairs inside
        await asyncio.gather(*(prod.publish("fan", big) for _ in range(5)))
        seen: dict[str, list[bytes]] = {"g1": [], "g2": []}
        others = BeanstalkdClient(server.client_args())
        await others.connect("consumer")
        await cons.subscribe("fan", "g1", seen["g1"].extend, Membership(fanout=True))
        await others.subscribe("fan", "g2", seen["g2"].extend, Membership(fanout=True))
        for _ in range(100):
            if all(len(v) >= 5 for v in seen.values()):
                break
            await asyncio.sleep(0.05)
        assert all(v == [big] * 5 for v in seen.values()), {k: len(v) for k, v in seen.items()}
        for c in (cons, others, prod):
            await c.close()

    try:
        asyncio.run(run())
    finally:
        server.cleanup()
