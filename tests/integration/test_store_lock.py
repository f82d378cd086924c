"""One process per store (issue 33, item 0): a second broker, NameServer or standalone on a home that is in
use refuses to start with RocketMQ's "Lock failed, MQ already started" and a non-zero exit, before it
touches anything; the first keeps working and its acknowledged messages survive a restart. A kill -9'd
holder does not leave a stale lock behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.procs import free_port, start_namesrv
from tests.integration.broker_support import create_topic, pull, records, send, start_broker, start_cluster
from tests.interop.standalone import start_standalone

from rocketq.protocol.codes import ResponseCode
from rocketq.remoting import RemotingClient

LOCK_FAILED = "Lock failed, MQ already started"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketq.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def tree(home: Path) -> dict[str, int]:
    """path -> size of every file of the store and the NameServer's KV under home (logs are shared), except
    what the running holder rewrites on its own (checkpoint, offsets, the index its dispatch thread fills)."""
    out = {}
    for dirpath, _, names in [*os.walk(home / "store"), *os.walk(home / "namesrv")]:
        if os.path.basename(dirpath) == "index":
            continue
        for n in names:
            if n in ("checkpoint", "consumerOffset.json") or n.endswith(".bak"):
                continue
            p = Path(dirpath) / n
            out[str(p.relative_to(home))] = p.stat().st_size
    return out


async def send_all(addr: str, topic: str, n: int, tag: str, create: bool = False) -> list[bytes]:
    bodies = [f"{tag}-{i}".encode() for i in range(n)]
    async with RemotingClient() as c:
        if create:
            assert (await create_topic(c, addr, topic, queues=1)).code == ResponseCode.SUCCESS
        for b in bodies:
            resp = await send(c, addr, topic, b, queue_id=0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
    return bodies


async def pull_all(addr: str, topic: str) -> list[bytes]:
    out: list[bytes] = []
    async with RemotingClient() as c:
        offset = 0
        while True:
            resp = await pull(c, addr, "lock_check_group", topic, 0, offset)
            if resp.code != ResponseCode.SUCCESS:
                return out
            recs = records(resp)
            out += [bytes(r.body) for r in recs]
            offset = recs[-1].queue_offset + 1


def test_second_standalone_on_a_home_refuses_and_the_first_keeps_its_acked_messages(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = start_standalone(home)
    try:
        topic = "LockedTopic"
        acked = asyncio.run(send_all(first.broker, topic, 20, "before", create=True))
        assert (home / "store" / "abort").exists()  # the first one is running
        before = tree(home)

        second = run_cli(
            "standalone", "--home", str(home), "--namesrv-port", str(free_port()),
            "--broker-port", str(free_port()), "-c", str(home / "broker.conf"),
        )  # fmt: skip
        assert second.returncode != 0
        assert LOCK_FAILED in second.stderr, second.stderr + second.stdout
        assert str(first.proc.pid) in second.stderr  # names the holder
        assert "boot success" not in second.stdout
        # the loser created, deleted or resized nothing: the first one's abort file, lock (with its pid),
        # segments, queues and config are as they were
        assert (home / "store" / "abort").exists()
        assert tree(home) == before

        acked += asyncio.run(send_all(first.broker, topic, 20, "after"))  # the first one still works
        assert first.stop() == 0
        first = start_standalone(home)
        assert asyncio.run(pull_all(first.broker, topic)) == acked
    finally:
        first.stop()


def test_second_broker_and_namesrv_refuse_and_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    try:
        topic = "LockedTopic2"
        acked = asyncio.run(send_all(cluster.addr, topic, 10, "m", create=True))
        ns_home = tmp_path / "ns"
        ns_second = run_cli("namesrv", "-p", str(free_port()), "--home", str(ns_home))
        assert ns_second.returncode != 0 and LOCK_FAILED in ns_second.stderr, ns_second.stderr

        conf = cluster.home / "broker.conf"  # the same storePathRootDir
        broker_second = run_cli(
            "broker", "-n", cluster.namesrv.addr, "-c", str(conf), "--port", str(free_port())
        )
        assert broker_second.returncode != 0 and LOCK_FAILED in broker_second.stderr, broker_second.stderr
        assert (cluster.home / "store" / "abort").exists()

        # kill -9: the kernel drops the lock with the process; the restart recovers and keeps every ack
        # (a message is acknowledged after it reached the page cache, which a process crash does not lose)
        cluster.broker.kill()
        cluster.broker = start_broker(
            cluster.home, cluster.namesrv.addr, cluster.conf, port=cluster.broker.port
        )
        assert asyncio.run(pull_all(cluster.addr, topic)) == acked

        cluster.namesrv.stop()  # a stopped NameServer releases its home too
        cluster.namesrv = start_namesrv(ns_home)
    finally:
        cluster.stop()
