"""Issue 33 item 2: what a peer can make a broker or NameServer hold before any request runs is bounded.

Real processes with tight limits (1 MiB frames, 2 MiB of buffered partial frames in total, a 1.5 s frame
deadline, 40 connections per address): half frames, dribbling, connection floods and malformed frames,
then the same server still answers a normal request. The defaults still take a full 16 MiB frame and many
connections (on the broker of the last test).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.procs import RocketqProcess, start_namesrv_with_conf, start_rocketq
from tests.integration.broker_support import BROKER_BOOT, TEST_CONF, run, start_broker, write_conf

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import MAX_FRAME_SIZE, RemotingCommand
from rocketq.remoting import RemotingClient

MIB = 1024 * 1024
TIGHT = {
    "serverFrameMaxLength": str(MIB),
    "serverMaxBufferedBytes": str(2 * MIB),
    "serverFrameReadTimeoutMillis": "1500",
    "serverMaxConnectionsPerAddress": "40",
    "serverMaxConnections": "200",
    "serverRejectLogIntervalSeconds": "3",
}


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RocketqProcess]]:
    home = tmp_path_factory.mktemp("remoting-limits")
    ns = start_namesrv_with_conf(home / "ns", TIGHT)
    try:
        broker = start_broker(home / "broker", ns.addr, {**TEST_CONF, **TIGHT})
    except BaseException:
        ns.stop()
        raise
    yield {"broker": broker, "namesrv": ns}
    broker.stop()
    ns.stop()


def probe(proc: RocketqProcess, kind: str) -> RemotingCommand:
    code = RequestCode.GET_BROKER_RUNTIME_INFO if kind == "broker" else RequestCode.GET_BROKER_CLUSTER_INFO

    async def go() -> RemotingCommand:
        async with RemotingClient() as c:
            return await c.invoke(proc.addr, RemotingCommand.request(code, {}), 10.0)

    return run(go())


def half_frame(port: int, declared: int, send: int) -> socket.socket:
    """A connection that declares a frame of ``declared`` bytes and sends ``send`` bytes of it."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    data = struct.pack(">ii", declared, 2) + b"{}" + b"\x00" * send
    with contextlib.suppress(OSError):  # the server stopped reading (or closed us): the rest stays here
        s.sendall(data)
    return s


def logged(proc: RocketqProcess, kind: str, at_least: int, timeout: float = 10.0) -> list[str]:
    """The guard's WARNING lines about ``kind`` once their counts add up to ``at_least`` (or the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [ln for ln in proc.lines if kind in ln]
        total = sum(int(n) for ln in lines for n in re.findall(re.escape(kind) + r" ×(\d+)", ln))
        if total >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.2)


def closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def wait_closed(socks: list[socket.socket], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    closed: set[int] = set()
    while time.monotonic() < deadline and len(closed) < len(socks):
        for i, s in enumerate(socks):
            if i not in closed and closed_by_peer(s):
                closed.add(i)
        time.sleep(0.1)
    return len(closed)


@pytest.mark.parametrize("kind", ["broker", "namesrv"])
def test_half_frames_are_bounded_and_time_out(servers: dict[str, RocketqProcess], kind: str) -> None:
    proc = servers[kind]
    base = rss_mib(proc.pid)
    # 36 connections each hold 0.95 MiB of a declared 1 MiB frame: 34 MiB without a bound
    socks = [half_frame(proc.port, MIB, MIB - 50 * 1024) for _ in range(36)]
    try:
        time.sleep(0.8)
        grown = rss_mib(proc.pid) - base
        assert grown < 20, f"{kind} grew {grown:.1f} MiB under 36 half frames (limit 2 MiB + one frame)"
        resp = probe(proc, kind)  # small traffic still gets through
        assert resp.code == ResponseCode.SUCCESS
        # the frame deadline (1.5 s from the first byte) closes them all, also those paused for room
        assert wait_closed(socks, 15.0) == len(socks)
    finally:
        for s in socks:
            s.close()
    assert probe(proc, kind).code == ResponseCode.SUCCESS


@pytest.mark.parametrize("kind", ["broker", "namesrv"])
def test_dribbling_does_not_keep_a_frame_alive(servers: dict[str, RocketqProcess], kind: str) -> None:
    proc = servers[kind]
    s = socket.create_connection(("127.0.0.1", proc.port))
    try:
        s.sendall(struct.pack(">i", 4096))
        s.setblocking(False)
        t0 = time.monotonic()
        closed = False
        while time.monotonic() - t0 < 15.0 and not closed:
            with contextlib.suppress(OSError):
                s.send(b"\x00")  # a byte every 0.2 s: the idle timer alone would never fire
            time.sleep(0.2)
            closed = closed_by_peer(s)
        assert closed, f"{kind} kept a dribbling half frame open for 15 s (frame deadline 1.5 s)"
    finally:
        s.close()


def test_connection_caps_and_one_summary_line(servers: dict[str, RocketqProcess]) -> None:
    proc = servers["broker"]
    socks = []
    try:
        for _ in range(55):  # 40 per address allowed
            s = socket.create_connection(("127.0.0.1", proc.port))
            s.setblocking(False)
            socks.append(s)
        time.sleep(1.0)
        refused = sum(closed_by_peer(s) for s in socks)
        assert refused >= 15, f"only {refused} of 55 connections from one address were refused (cap 40)"
        assert refused <= 55 - 30  # the first ones (up to the cap, minus the fixture's own) stay
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    assert probe(proc, "broker").code == ResponseCode.SUCCESS  # the cap frees with the connections
    # the first refusal logged at once, the rest counted into the interval's summary: not a line each
    lines = logged(proc, "serverMaxConnectionsPerAddress", refused)
    assert 1 <= len(lines) <= 2, lines
    assert all("WARNING" in ln for ln in lines)


def test_malformed_connections_are_summarized(servers: dict[str, RocketqProcess]) -> None:
    proc = servers["namesrv"]
    before = len(logged(proc, "malformed frame", 0, 0))
    socks = []
    for _ in range(30):
        s = socket.create_connection(("127.0.0.1", proc.port))
        s.sendall(struct.pack(">i", -5) + b"garbage")
        s.setblocking(False)
        socks.append(s)
    assert wait_closed(socks, 10.0) == 30
    for s in socks:
        s.close()
    assert probe(proc, "namesrv").code == ResponseCode.SUCCESS
    after = logged(proc, "malformed frame", 30)[before:]
    assert 1 <= len(after) <= 2, after  # 30 bad connections: one line at once, one summary
    assert all("WARNING" in ln for ln in after)


def test_frame_over_the_limit_closes_the_connection(servers: dict[str, RocketqProcess]) -> None:
    proc = servers["broker"]
    s = socket.create_connection(("127.0.0.1", proc.port))
    try:
        s.sendall(struct.pack(">ii", MIB + 1, 2) + b"{}")
        s.settimeout(10.0)
        assert s.recv(1) == b""  # closed, nothing buffered
    finally:
        s.close()


def test_body_over_max_message_size_names_the_limit(servers: dict[str, RocketqProcess]) -> None:
    from tests.integration.broker_support import create_topic, send

    proc = servers["broker"]
    limit = int(TEST_CONF["maxMessageSize"])

    async def go() -> tuple[RemotingCommand, RemotingCommand]:
        async with RemotingClient() as c:
            assert (await create_topic(c, proc.addr, "BigBody", 1)).code == ResponseCode.SUCCESS
            exact = await send(c, proc.addr, "BigBody", b"x" * limit, queue_id=0)  # record > limit
            over = await send(c, proc.addr, "BigBody", b"x" * (limit + 1), queue_id=0)
            return exact, over

    exact, over = run(go())
    for r in (exact, over):
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        assert f"maxMessageSize={limit}" in (r.remark or ""), r.remark
    assert "record" in (exact.remark or "")


def test_defaults_take_a_full_frame_and_many_connections(tmp_path: Path) -> None:
    ns_less = write_conf(tmp_path / "b", {**TEST_CONF})
    broker = start_rocketq(
        ["broker", "-c", str(ns_less), "--port", "{port}"], boot_line=BROKER_BOOT, timeout=60.0
    )
    try:
        header = RemotingCommand.request(9999, {}).encode_header()
        body = b"\x01" * (MAX_FRAME_SIZE - 4 - len(header))  # the frame is exactly 16 MiB

        async def go() -> None:
            async with RemotingClient() as c:
                r = await c.invoke(broker.addr, RemotingCommand.request(9999, {}, body), 30.0)
                assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            clients = [RemotingClient() for _ in range(300)]  # 300 connections from one address
            try:
                code = RequestCode.GET_BROKER_RUNTIME_INFO
                resps = await asyncio.gather(
                    *(c.invoke(broker.addr, RemotingCommand.request(code, {}), 30.0) for c in clients)
                )
                assert all(r.code == ResponseCode.SUCCESS for r in resps)
            finally:
                await asyncio.gather(*(c.close() for c in clients))

        run(go())
    finally:
        broker.stop()
