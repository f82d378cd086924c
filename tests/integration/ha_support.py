"""Master-slave clusters of real processes on 127.0.0.1 for the HA tests (and bench/ha_*): a NameServer and
brokers with explicit free ports for listenPort and haListenPort, small stores, fast HA timings."""

from __future__ import annotations

import asyncio
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from tests.helpers.procs import RocketqProcess, free_port, start_namesrv, start_rocketq

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

BROKER_BOOT = "The broker["

# small segments (the disk is shared), fast discovery and reconnects (registration every second, the slave
# reconnects after haSendHeartbeatInterval), reads from the slave allowed (the seed's promise)
HA_TEST_CONF = {
    "mapedFileSizeCommitLog": str(4 * 1024 * 1024),
    "mapedFileSizeConsumeQueue": str(20 * 20000),
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
    "diskMaxUsedSpaceRatio": "99",
    "diskSpaceCleanForciblyRatio": "99",
    "diskSpaceWarningLevelRatio": "99",
    "flushIntervalCommitLog": "100",
    "registerNameServerPeriod": "1000",
    "haSendHeartbeatInterval": "1000",
    "haHousekeepingInterval": "6000",
    "slaveReadEnable": "true",
    "autoCreateTopicEnable": "false",
}


@dataclass
class Node:
    name: str
    home: Path
    conf: dict[str, str]
    port: int
    ha_port: int
    proc: RocketqProcess | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def commitlog_dir(self) -> Path:
        return Path(self.conf["storePathRootDir"]) / "commitlog"


@dataclass
class HACluster:
    home: Path
    namesrv: RocketqProcess
    nodes: dict[str, Node] = field(default_factory=dict)

    @property
    def ns(self) -> str:
        return self.namesrv.addr

    def add(
        self, name: str, broker_name: str, role: str, broker_id: int = 0, start: bool = True, **extra: str
    ) -> Node:
        home = self.home / name
        home.mkdir(parents=True, exist_ok=True)
        conf = {
            **HA_TEST_CONF,
            "brokerName": broker_name,
            "brokerRole": role,
            "brokerId": str(broker_id),
            "storePathRootDir": str(home / "store"),
            "haListenPort": str(free_port()),
            **extra,
        }
        node = Node(name, home, conf, free_port(), int(conf["haListenPort"]))
        self.nodes[name] = node
        if start:
            self.start(name)
        return node

    def start(self, name: str, env: dict[str, str] | None = None) -> Node:
        node = self.nodes[name]
        path = node.home / "broker.conf"
        path.write_text("".join(f"{k}={v}\n" for k, v in node.conf.items()))
        node.proc = start_rocketq(
            ["broker", "-n", self.ns, "-c", str(path), "--port", "{port}"],
            boot_line=BROKER_BOOT,
            port=node.port,
            timeout=60.0,
            env=env,
        )
        return node

    def kill(self, name: str) -> None:
        p = self.nodes[name].proc
        if p is not None:
            p.kill()

    def stop(self, name: str) -> int:
        p = self.nodes[name].proc
        return p.stop() if p is not None else 0

    def close(self) -> None:
        for n in self.nodes.values():
            if n.proc is not None:
                n.proc.stop()
        self.namesrv.stop()


def start_ha_cluster(home: Path) -> HACluster:
    return HACluster(home, start_namesrv(home / "ns"))


# -- asking the brokers ----------------------------------------------------------------------------------
async def invoke(
    addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b"", hook=None
) -> RemotingCommand:
    async with RemotingClient(rpc_hook=hook) as c:
        return await c.invoke(addr, RemotingCommand.request(code, ext or {}, body), 5.0)


def ha_status(addr: str, hook=None) -> dict:
    resp = asyncio.run(invoke(addr, RequestCode.GET_BROKER_HA_STATUS, hook=hook))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return orjson.loads(resp.body_bytes)


def runtime_info(addr: str) -> dict[str, str]:
    resp = asyncio.run(invoke(addr, RequestCode.GET_BROKER_RUNTIME_INFO))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return orjson.loads(resp.body_bytes)["table"]


def create_topic(addr: str, topic: str, queues: int = 4, hook=None) -> None:
    ext = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": "6"}
    resp = asyncio.run(invoke(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext, hook=hook))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def wait_until(pred, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except (OSError, AssertionError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def wait_slave_attached(master: Node, n: int = 1, timeout: float = 30.0) -> None:
    wait_until(
        lambda: sum(1 for c in ha_status(master.addr)["haConnectionInfo"] if c["state"] == "transfer") >= n,
        timeout,
        f"{n} slave(s) streaming from {master.name}",
    )


def wait_caught_up(master: Node, slave: Node, timeout: float = 60.0) -> int:
    def same() -> bool:
        m = int(runtime_info(master.addr)["commitLogMaxOffset"])
        return m > 0 and int(runtime_info(slave.addr)["commitLogMaxOffset"]) == m

    wait_until(same, timeout, f"{slave.name} to catch up with {master.name}")
    return int(runtime_info(master.addr)["commitLogMaxOffset"])


# -- reading a stopped broker's files ---------------------------------------------------------------------
_HEAD = struct.Struct(">iiiiiqq")  # size magic crc qid flag qoff phys
BLANK_MAGIC = -875286124


def commitlog_bytes(node: Node, end: int | None = None) -> bytes:
    """The node's CommitLog from its first segment, up to end (its data, zeros beyond)."""
    files = sorted(f for f in os.listdir(node.commitlog_dir) if len(f) == 20 and f.isdigit())
    out = bytearray()
    for f in files:
        out += (node.commitlog_dir / f).read_bytes()
    first = int(files[0]) if files else 0
    data = bytes(out)
    return data if end is None else data[: end - first]


def same_log(a: Node, b: Node) -> bool:
    """The two (stopped) brokers' CommitLogs are byte-identical: every segment both have holds the same
    bytes, and a segment only one has (created ahead of the writer) holds nothing but zeros."""
    files_a = {f for f in os.listdir(a.commitlog_dir) if len(f) == 20 and f.isdigit()}
    files_b = {f for f in os.listdir(b.commitlog_dir) if len(f) == 20 and f.isdigit()}
    for f in sorted(files_a | files_b):
        da = (a.commitlog_dir / f).read_bytes() if f in files_a else None
        db = (b.commitlog_dir / f).read_bytes() if f in files_b else None
        if da is None or db is None:
            if (da or db or b"").strip(b"\0"):
                return False
        elif da != db:
            return False
    return bool(files_a)


def topic_on(addr: str, topic: str, hook=None) -> bool:
    resp = asyncio.run(invoke(addr, RequestCode.GET_ALL_TOPIC_CONFIG, hook=hook))
    return resp.code == ResponseCode.SUCCESS and topic in orjson.loads(resp.body_bytes)["topicConfigTable"]


def scan_records(node: Node) -> list[tuple[int, int, str, int, int, bytes]]:
    """Every record of a (stopped) broker's CommitLog, CRC-checked: (phys, size, topic, qid, qoff, body)."""
    from rocketq.protocol.record import decode_record

    files = sorted(f for f in os.listdir(node.commitlog_dir) if len(f) == 20 and f.isdigit())
    out = []
    for f in files:
        data = (node.commitlog_dir / f).read_bytes()
        base = int(f)
        pos = 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">ii", data, pos)
            if size <= 0 or magic == BLANK_MAGIC:
                break
            m = decode_record(memoryview(data)[pos : pos + size], verify_crc=True)
            assert m.commit_log_offset == base + pos
            out.append((base + pos, size, m.topic, m.queue_id, m.queue_offset, bytes(m.body)))
            pos += size
    return out
