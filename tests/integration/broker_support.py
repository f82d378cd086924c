"""Support for the broker integration tests: real namesrv + broker processes and a raw RemotingClient."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from tests.helpers.procs import RocketqProcess, free_port, start_namesrv, start_rocketq

from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.properties import properties_to_string
from rocketq.protocol.record import decode_records
from rocketq.remoting import RemotingClient

BROKER_BOOT = "The broker["

TEST_CONF = {
    "brokerName": "broker-t",
    "mapedFileSizeCommitLog": str(4 * 1024 * 1024),
    "mapedFileSizeConsumeQueue": str(20 * 2000),
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
    "diskMaxUsedSpaceRatio": "99",
    "diskSpaceCleanForciblyRatio": "99",
    "diskSpaceWarningLevelRatio": "99",
    "messageDelayLevel": "1s 2s 3s",
    "maxMessageSize": str(256 * 1024),
    "flushIntervalCommitLog": "100",
}


@dataclass
class Cluster:
    namesrv: RocketqProcess
    broker: RocketqProcess
    home: Path
    conf: dict[str, str]

    @property
    def addr(self) -> str:
        return self.broker.addr

    def restart_broker(self, kill: bool = False) -> None:
        if kill:
            self.broker.kill()
        else:
            assert self.broker.stop() == 0, self.broker.output
        self.broker = start_broker(self.home, self.namesrv.addr, self.conf, port=self.broker.port)

    def stop(self) -> None:
        self.broker.stop()
        self.namesrv.stop()


def write_conf(home: Path, conf: dict[str, str]) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "broker.conf"
    all_conf = {"storePathRootDir": str(home / "store"), **conf}
    # a master listens on haListenPort too: an explicit free port, not listenPort + 1 (last, so the
    # caller's keys keep their line numbers)
    all_conf.setdefault("haListenPort", str(free_port()))
    path.write_text("".join(f"{k}={v}\n" for k, v in all_conf.items()))
    return path


def start_broker(home: Path, ns: str, conf: dict[str, str], port: int | None = None) -> RocketqProcess:
    path = write_conf(home, conf)
    args = ["broker", "-n", ns, "-c", str(path), "--port", "{port}"]
    return start_rocketq(args, boot_line=BROKER_BOOT, port=port, timeout=60.0)


def start_cluster(home: Path, **overrides: str) -> Cluster:
    conf = {**TEST_CONF, **overrides}
    ns = start_namesrv(home / "ns")
    try:
        broker = start_broker(home / "broker", ns.addr, conf)
    except BaseException:
        ns.stop()
        raise
    return Cluster(ns, broker, home / "broker", conf)


def cluster_fixture(name: str, **overrides: str):
    """A module-scoped ``cluster`` fixture: one NameServer + broker (TEST_CONF + overrides) per test file."""

    @pytest.fixture(scope="module", name="cluster")
    def _cluster(tmp_path_factory: pytest.TempPathFactory):
        c = start_cluster(tmp_path_factory.mktemp(name), **overrides)
        yield c
        c.stop()

    return _cluster


# -- raw client helpers ------------------------------------------------------------------------------
def run(coro):
    return asyncio.run(coro)


async def call(addr: str, code: int, ext: dict | None = None, body: bytes = b"", timeout: float = 5.0):
    async with RemotingClient() as c:
        return await c.invoke(
            addr, RemotingCommand.request(code, {k: str(v) for k, v in (ext or {}).items()}, body), timeout
        )


def send_ext(
    topic: str, props: dict[str, str] | None = None, queue_id: int = -1, group: str = "PG", **extra
) -> dict:
    ext = {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": properties_to_string(props or {}),
        "j": "0",
        "k": "false",
    }
    ext.update({k: str(v) for k, v in extra.items()})
    return ext


async def send(
    c: RemotingClient,
    addr: str,
    topic: str,
    body: bytes,
    props: dict[str, str] | None = None,
    queue_id: int = -1,
    **extra,
) -> RemotingCommand:
    req = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, send_ext(topic, props, queue_id, **extra), body
    )
    return await c.invoke(addr, req, 5.0)


def pull_ext(
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    sys_flag: int = 4,
    sub: str = "*",
    suspend_ms: int = 0,
    commit_offset: int = 0,
    max_nums: int = 32,
) -> dict:
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": str(suspend_ms),
        "subscription": sub,
        "subVersion": "0",
        "expressionType": "TAG",
    }


async def pull(
    c: RemotingClient,
    addr: str,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    timeout: float = 5.0,
    **kw,
) -> RemotingCommand:
    req = RemotingCommand.request(RequestCode.PULL_MESSAGE, pull_ext(group, topic, queue_id, offset, **kw))
    return await c.invoke(addr, req, timeout)


def records(resp: RemotingCommand):
    return decode_records(resp.body_bytes)


async def create_topic(
    c: RemotingClient, addr: str, topic: str, queues: int = 4, perm: int = 6
) -> RemotingCommand:
    ext = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": str(perm),
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    return await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 5.0)


async def heartbeat(
    c: RemotingClient, addr: str, client_id: str, group: str, topics: dict[str, str]
) -> RemotingCommand:
    body = {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [
                    {
                        "topic": t,
                        "subString": s,
                        "classFilterMode": False,
                        "tagsSet": [],
                        "codeSet": [],
                        "subVersion": 1,
                        "expressionType": "TAG",
                    }
                    for t, s in topics.items()
                ],
            }
        ],
        "producerDataSet": [{"groupName": "PG"}],
    }
    return await c.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(body)), 5.0)
