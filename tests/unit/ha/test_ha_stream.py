"""The HA master and slave in one process over real 127.0.0.1 sockets and real stores: what goes on the wire,
what a slave ends up with, and how both sides treat a peer that breaks the protocol."""

from __future__ import annotations

import asyncio
import struct

import pytest
from ha_helpers import SEG, RawPeer, commitlog_files, open_store, put, until

from rocketq.ha import auth
from rocketq.ha.frames import encode_report, encode_transfer_header
from rocketq.ha.master import HAConfig, HAServer
from rocketq.ha.slave import HAClient
from rocketq.store.config import BrokerRole

FAST = HAConfig(heartbeat_s=0.3, housekeeping_s=2.0, batch=4096)


async def read_frame(peer: RawPeer) -> tuple[int, bytes]:
    off, size = struct.unpack(">qi", await peer.read(12))
    return off, await peer.read(size) if size else b""


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_empty_slave_gets_the_last_segment_in_batches_then_heartbeats(tmp_path):
    m = open_store(tmp_path / "m")
    put(m, 250)  # a few 64 KiB segments
    last = m.commit_log.mfq.files[-1]
    assert last.file_from_offset >= 2 * SEG

    async def go():
        srv = HAServer(m, FAST)
        await srv.start("127.0.0.1", 0)
        peer = await RawPeer.connect(srv.port)
        try:
            await asyncio.sleep(0.3)
            assert srv.connections[0].next_transfer == -1  # nothing before the first report
            peer.send(encode_report(0))
            got = b""
            at = last.file_from_offset
            while at + len(got) < m.max_phy_offset:
                off, body = await read_frame(peer)
                assert off == at + len(got) and 0 < len(body) <= FAST.batch
                got += body
            assert got == bytes(last.view[: last.wrote_position])
            off, body = await read_frame(peer)  # idle: a heartbeat at the end of the log
            assert (off, body) == (m.max_phy_offset, b"")
            peer.send(encode_report(m.max_phy_offset))
            assert await until(lambda: srv.connections[0].ack == m.max_phy_offset)
            st = srv.status()
            assert st["inSyncSlaveNums"] == 1 and st["haConnectionInfo"][0]["diff"] == 0
        finally:
            peer.close()
            await srv.close()

    try:
        run(go())
    finally:
        m.shutdown()


@pytest.mark.parametrize(
    "reports, reason",
    [
        (lambda m: [m.max_phy_offset + 100], "ahead of the master"),
        (lambda m: [150], "inside a master record"),
        (lambda m: [-3], "negative"),
        (lambda m: [0, 10**12], "beyond"),  # acknowledges bytes never sent: a forged ack
        (lambda m: [m.max_phy_offset, m.max_phy_offset - 1], "backwards"),
    ],
)
def test_master_drops_a_slave_that_breaks_the_rules(tmp_path, reports, reason):
    m = open_store(tmp_path / "m")
    put(m, 20)

    async def go():
        srv = HAServer(m, FAST)
        await srv.start("127.0.0.1", 0)
        peer = await RawPeer.connect(srv.port)
        try:
            for r in reports(m):
                peer.send(encode_report(r))
                await asyncio.sleep(0.2)
            assert await peer.closed()
            assert await until(lambda: not srv.connections)
            assert reason in srv.status()["recentlyDropped"][-1]["reason"]
        finally:
            peer.close()
            await srv.close()

    try:
        run(go())
    finally:
        m.shutdown()


def test_master_drops_a_slave_that_stops_reading_or_reporting(tmp_path):
    m = open_store(tmp_path / "m", mapped_file_size_commitlog=8 << 20, max_message_size=64 * 1024)
    put(m, 120, size=60_000)  # ~7 MB to stream: more than the socket and the write buffer hold

    async def go():
        srv = HAServer(m, HAConfig(heartbeat_s=0.3, housekeeping_s=1.5, batch=32768))
        await srv.start("127.0.0.1", 0)
        reader = await RawPeer.connect(srv.port)
        silent = await RawPeer.connect(srv.port)
        try:
            reader.send(encode_report(0))  # then keeps reporting but never reads
            for _ in range(40):
                await asyncio.sleep(0.2)
                if not srv.connections:
                    break
                reader.send(encode_report(0))
            assert await until(lambda: len(srv.connections) == 0, 10)
            reasons = " | ".join(d["reason"] for d in srv.status()["recentlyDropped"])
            assert "not reading" in reasons and "no report" in reasons
        finally:
            reader.close()
            silent.close()
            await srv.close()

    try:
        run(go())
    finally:
        m.shutdown()


def test_client_follows_master_to_a_byte_identical_log(tmp_path):
    m = open_store(tmp_path / "m")
    s = open_store(tmp_path / "s", BrokerRole.SLAVE)
    put(m, 30)  # all in the first segment: the empty slave starts at 0

    async def go():
        srv = HAServer(m, FAST)
        await srv.start("127.0.0.1", 0)
        cli = HAClient(s.replica_appender(), FAST)
        cli.update_master(f"127.0.0.1:{srv.port}", "127.0.0.1:1", pin=True)
        cli.start()
        try:
            assert await until(lambda: s.max_phy_offset == m.max_phy_offset)
            for _ in range(5):  # the log grows while the slave follows
                put(m, 40, size=900)
                srv.notify()
                await asyncio.sleep(0.05)
            assert await until(lambda: srv.acks() == [m.max_phy_offset])
            assert cli.info()["isActivated"] and cli.info()["maxOffset"] == m.max_phy_offset
        finally:
            await cli.close()
            await srv.close()

    try:
        run(go())
        assert commitlog_files(s) == commitlog_files(m)
        assert s.get_topic_queue_table() == m.get_topic_queue_table()
    finally:
        m.shutdown()
        s.shutdown()


async def fake_master(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize(
    "frame, reason",
    [
        (encode_transfer_header(0, 5 << 20), "limit"),
        (encode_transfer_header(12345, 0), "pushed offset 12345"),  # not where the slave's log ends
        (encode_transfer_header(100, 4) + b"abcd", "segment boundary"),
        (encode_transfer_header(0, 100) + b"\0" * 100, "append refused (record)"),
    ],
)
def test_client_drops_a_master_that_sends_garbage(tmp_path, frame, reason):
    s = open_store(tmp_path / "s", BrokerRole.SLAVE)
    if "pushed" in reason:  # give the slave a log so the offset check applies
        m = open_store(tmp_path / "m")
        put(m, 3)
        s.replica_appender().append(0, bytes(m.commit_log.mfq.files[0].view[: m.max_phy_offset]))
        m.shutdown()
    got_report = []

    async def go():
        async def handler(r, w):
            got_report.append(struct.unpack(">q", await r.readexactly(8))[0])
            w.write(frame)
            await w.drain()
            try:
                await r.read()
            except ConnectionError:
                pass

        server, port = await fake_master(handler)
        cli = HAClient(s.replica_appender(), FAST)
        cli.update_master(f"127.0.0.1:{port}", None, pin=True)
        cli.start()
        try:
            assert await until(lambda: reason in cli.info()["lastError"]), cli.info()
            assert got_report[0] == s.max_phy_offset
        finally:
            await cli.close()
            server.close()

    try:
        before = s.max_phy_offset
        run(go())
        assert s.max_phy_offset == before  # nothing of the garbage is in the log
    finally:
        s.shutdown()


def _acl_master_auth():
    accounts = {"admin1": ("secret-1", True), "user1": ("secret-2", False)}
    return auth.MasterAuth(lambda ip: False, accounts.get)


@pytest.mark.parametrize(
    "creds, ok, reason",
    [
        (auth.Credentials("admin1", "secret-1"), True, ""),
        (auth.Credentials("admin1", "wrong-secret"), False, "does not match"),
        (auth.Credentials("user1", "secret-2"), False, "not admin"),
        (None, False, "did not authenticate"),
    ],
)
def test_acl_master_accepts_only_proven_admin_slaves(tmp_path, creds, ok, reason):
    m = open_store(tmp_path / "m")
    s = open_store(tmp_path / "s", BrokerRole.SLAVE)
    put(m, 10)

    async def go():
        srv = HAServer(m, FAST, _acl_master_auth())
        await srv.start("127.0.0.1", 0)
        cli = HAClient(s.replica_appender(), FAST, creds)
        cli.update_master(f"127.0.0.1:{srv.port}", None, pin=True)
        cli.start()
        try:
            if ok:
                assert await until(lambda: s.max_phy_offset == m.max_phy_offset)
                assert srv.status()["haConnectionInfo"][0]["accessKey"] == "admin1"
            else:
                assert await until(lambda: any(reason in d["reason"] for d in srv.recently_closed))
                assert s.max_phy_offset == 0
        finally:
            await cli.close()
            await srv.close()

    try:
        run(go())
    finally:
        m.shutdown()
        s.shutdown()


def test_acl_off_master_answers_hello_without_asking_a_proof_and_raw_forgers_get_nothing(tmp_path):
    m = open_store(tmp_path / "m")
    put(m, 10)

    async def go():
        srv = HAServer(m, FAST)  # no ACL: HELLO answered with required=0
        await srv.start("127.0.0.1", 0)
        peer = await RawPeer.connect(srv.port)
        acl_srv = HAServer(m, FAST, _acl_master_auth())
        await acl_srv.start("127.0.0.1", 0)
        forger = await RawPeer.connect(acl_srv.port)
        try:
            peer.send(auth.HELLO)
            required, _ = auth.parse_challenge(await peer.read(auth.CHALLENGE_SIZE))
            assert not required
            peer.send(encode_report(0))
            off, body = await read_frame(peer)
            assert off == 0 and body
            forger.send(encode_report(m.max_phy_offset))  # a classic (forged) ack, no handshake
            assert await forger.closed()
            assert acl_srv.acks() == []
        finally:
            peer.close()
            forger.close()
            await srv.close()
            await acl_srv.close()

    try:
        run(go())
    finally:
        m.shutdown()


def test_slave_with_credentials_falls_back_for_a_master_without_the_handshake(tmp_path, monkeypatch):
    monkeypatch.setattr(auth, "AUTH_TIMEOUT_S", 0.5)
    m = open_store(tmp_path / "m")
    s = open_store(tmp_path / "s", BrokerRole.SLAVE)
    put(m, 10)
    firsts: list[bytes] = []

    async def go():
        async def classic_master(r, w):  # an Apache RocketMQ master: a HELLO is just a (negative) report
            first = await r.readexactly(8)
            firsts.append(first)
            if first == auth.HELLO:
                await r.read()
                return
            data = bytes(m.commit_log.mfq.files[0].view[: m.max_phy_offset])
            w.write(encode_transfer_header(0, len(data)) + data)
            await w.drain()
            await r.read()

        server, port = await fake_master(classic_master)
        cli = HAClient(s.replica_appender(), FAST, auth.Credentials("admin1", "secret-1"))
        cli.update_master(f"127.0.0.1:{port}", None, pin=True)
        cli.start()
        try:
            assert await until(lambda: s.max_phy_offset == m.max_phy_offset)
        finally:
            await cli.close()
            server.close()

    try:
        run(go())
        assert firsts[0] == auth.HELLO and firsts[1] == encode_report(0)
    finally:
        m.shutdown()
        s.shutdown()
