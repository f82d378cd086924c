"""Replication through faults, real processes on 127.0.0.1: a slave killed and restarted mid-stream, an empty
slave far behind, a network partition between master and slave (a userspace TCP proxy), a full disk on the
slave. No crash, no corruption, clear statuses, and the logs byte-identical once the fault is gone."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest
from tests.helpers.tcp_proxy import TcpProxy
from tests.integration.ha_support import create_topic as create
from tests.integration.ha_support import (
    ha_status,
    runtime_info,
    same_log,
    scan_records,
    start_ha_cluster,
    wait_caught_up,
    wait_slave_attached,
    wait_until,
)

from rocketq import Message, Producer, SendStatus

TOPIC = "HA_FAULTS"


@pytest.fixture
def cluster(tmp_path):
    c = start_ha_cluster(tmp_path)
    yield c
    c.close()


class Load:
    """Sends in a background thread until stopped; keeps every status."""

    def __init__(self, ns: str, size: int = 1024) -> None:
        self.statuses: list[SendStatus] = []
        self.errors = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, args=(ns, size), daemon=True)

    def _run(self, ns: str, size: int) -> None:
        with Producer(f"PG_load_{id(self)}", namesrv=ns, send_msg_timeout=5000) as p:
            while not self._stop.is_set():
                futures = [p.send_async(Message(TOPIC, b"x" * size)) for _ in range(32)]
                for f in futures:
                    try:
                        self.statuses.append(f.result(30).status)
                    except Exception:
                        self.errors += 1

    def __enter__(self) -> Load:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(60)


def test_slave_killed_and_restarted_mid_stream(cluster):
    m = cluster.add("m", "broker-a", "ASYNC_MASTER")
    create(m.addr, TOPIC)
    s = cluster.add("s", "broker-a", "SLAVE", 1)
    wait_slave_attached(m)
    with Load(cluster.ns) as load:
        wait_until(lambda: len(load.statuses) > 1000, 30, "load")
        cluster.kill("s")
        wait_until(lambda: not ha_status(m.addr)["haConnectionInfo"], 30, "the master to notice")
        cluster.start("s")  # after a kill -9: recovery, then it resumes from its last whole record
        wait_slave_attached(m)
        n = len(load.statuses)
        wait_until(lambda: len(load.statuses) > n + 1000, 30, "more load")
        assert cluster.stop("s") == 0  # a clean restart too
        cluster.start("s")
        wait_slave_attached(m)
    assert load.errors == 0 and set(load.statuses) == {SendStatus.SEND_OK}
    wait_caught_up(m, s)
    assert cluster.stop("s") == 0 and cluster.stop("m") == 0
    assert same_log(m, s)
    assert len(scan_records(s)) == len(load.statuses)  # every record, CRC-checked


def test_empty_slave_far_behind_starts_at_the_masters_last_segment(cluster):
    m = cluster.add("m", "broker-a", "SYNC_MASTER", mapedFileSizeCommitLog=str(1 << 20))
    create(m.addr, TOPIC)
    seg = int(m.conf["mapedFileSizeCommitLog"])
    with Producer("PG_far", namesrv=cluster.ns, send_msg_timeout=10_000) as p:
        statuses = set()
        for _ in range(3 * seg // 1100 // 64):
            futures = [p.send_async(Message(TOPIC, b"y" * 1024)) for _ in range(64)]
            statuses |= {f.result(60).status for f in futures}
        assert statuses == {SendStatus.SLAVE_NOT_AVAILABLE}  # stored, but no slave
        end = int(runtime_info(m.addr)["commitLogMaxOffset"])
        assert end > 2 * seg
        s = cluster.add("s", "broker-a", "SLAVE", 1, mapedFileSizeCommitLog=str(1 << 20))
        wait_caught_up(m, s)
        assert int(runtime_info(s.addr)["commitLogMinOffset"]) == end - end % seg
        assert p.send(Message(TOPIC, b"now with a slave")).status is SendStatus.SEND_OK
    wait_caught_up(m, s)
    assert cluster.stop("s") == 0 and cluster.stop("m") == 0
    for name in os.listdir(s.commitlog_dir):  # the segments the slave has are the master's, byte for byte
        assert (s.commitlog_dir / name).read_bytes() == (m.commitlog_dir / name).read_bytes()


def test_partition_between_master_and_slave(cluster):
    m = cluster.add("m", "broker-a", "SYNC_MASTER", slaveTimeout="1000", haHousekeepingInterval="3000")
    create(m.addr, TOPIC)
    proxy = TcpProxy(m.ha_port).start()
    try:
        # the slave gives up later than the master, so the master's own housekeeping is what drops it
        s = cluster.add("s", "broker-a", "SLAVE", 1, haMasterAddress=f"127.0.0.1:{proxy.port}",
                        haHousekeepingInterval="5000")  # fmt: skip
        wait_slave_attached(m)
        with Producer("PG_part", namesrv=cluster.ns, send_msg_timeout=10_000) as p:
            assert p.send(Message(TOPIC, b"before")).status is SendStatus.SEND_OK
            proxy.blackhole()  # silence both ways, no error on either side
            assert p.send(Message(TOPIC, b"partitioned")).status is SendStatus.FLUSH_SLAVE_TIMEOUT
            # the master's housekeeping drops the silent slave: no slave in sync any more
            wait_until(lambda: not ha_status(m.addr)["haConnectionInfo"], 20, "the master to drop the slave")
            assert p.send(Message(TOPIC, b"alone")).status is SendStatus.SLAVE_NOT_AVAILABLE
            dropped = ha_status(m.addr)["recentlyDropped"]
            assert any("no report" in d["reason"] for d in dropped), dropped
            wait_until(
                lambda: "nothing from the master" in ha_status(s.addr)["haClientRuntimeInfo"]["lastError"],
                20, "the slave to give up the silent master",
            )  # fmt: skip
            proxy.forward()  # heal
            wait_slave_attached(m, timeout=30)
            wait_until(lambda: p.send(Message(TOPIC, b"healed")).status is SendStatus.SEND_OK, 30, "acks")
        wait_caught_up(m, s)
        assert cluster.stop("s") == 0 and cluster.stop("m") == 0
        assert same_log(m, s)
    finally:
        proxy.close()


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "slave-disk"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_on_the_slave(cluster, small_tmpfs):
    m = cluster.add("m", "broker-a", "SYNC_MASTER", slaveTimeout="1000",
                    haMaxGapNotInSync=str(2 * 1024 * 1024))  # fmt: skip
    create(m.addr, TOPIC)
    s = cluster.add("s", "broker-a", "SLAVE", 1, storePathRootDir=str(small_tmpfs / "store"))
    wait_slave_attached(m)
    ballast = small_tmpfs / "ballast"
    free = os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize
    ballast.write_bytes(b"\0" * max(free - 5 * 1024 * 1024, 0))  # ~5 MiB left: not even two segments
    statuses: set[SendStatus] = set()
    with Producer("PG_full", namesrv=cluster.ns, send_msg_timeout=10_000) as p:
        deadline = time.monotonic() + 60
        while SendStatus.SLAVE_NOT_AVAILABLE not in statuses and time.monotonic() < deadline:
            futures = [p.send_async(Message(TOPIC, b"z" * 4096)) for _ in range(64)]
            statuses |= {f.result(30).status for f in futures}
        # the master goes on storing and says so: the slave's disk is full
        assert SendStatus.SLAVE_NOT_AVAILABLE in statuses
        assert s.proc.alive()
        err = ha_status(s.addr)["haClientRuntimeInfo"]["lastError"]
        print("slave:", err)
        assert "disk" in err or "space" in err.lower() or "cannot" in err, err
        ballast.unlink()  # space again: the slave resumes by itself
        wait_caught_up(m, s, timeout=60)
        wait_until(lambda: p.send(Message(TOPIC, b"space again")).status is SendStatus.SEND_OK, 30, "acks")
    wait_caught_up(m, s)
    assert cluster.stop("s") == 0 and cluster.stop("m") == 0
    assert same_log(m, s)
    scan_records(s)  # every record whole and CRC-valid
