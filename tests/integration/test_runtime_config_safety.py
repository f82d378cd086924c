"""UPDATE_BROKER_CONFIG refuses values that would leave the broker unusable (issue 33, item 4), and the same
rules apply when broker.conf is loaded: a bad saved value is a clear startup error, not a broker that
refuses every request. Real broker processes, real broker.conf files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.broker_support import create_topic, run, send, start_cluster, write_conf

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

C = RequestCode
OK = ResponseCode.SUCCESS

UNSAFE = [
    ("brokerPermission", "0"),  # neither readable nor writable: every request refused
    ("brokerPermission", "1"),
    ("brokerPermission", "8"),
    ("brokerPermission", "-2"),
    ("syncFlushTimeout", "0"),  # every SYNC_FLUSH send would time out
    ("syncFlushTimeout", "-5"),
    ("maxMessageSize", "1"),  # every message refused
    ("maxMessageSize", str(1 << 30)),
    ("channelExpiredTimeout", "0"),  # every client expired at the next scan
    ("shortPollingTimeMills", "0"),
    ("defaultTopicQueueNums", "0"),
    ("defaultTopicQueueNums", "100000"),
    ("region", "two words"),
    ("region", ""),
    ("longPollingEnable", "yes"),
    ("maxMessageSize", "4MiB"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("config-safety"))
    yield c
    c.stop()


async def update(c: RemotingClient, addr: str, body: str) -> RemotingCommand:
    return await c.invoke(addr, RemotingCommand.request(C.UPDATE_BROKER_CONFIG, {}, body.encode()), 5.0)


def test_unsafe_runtime_values_are_refused_and_nothing_changes(cluster) -> None:
    addr = cluster.addr
    conf_file = cluster.home / "broker.conf"

    async def go() -> None:
        async with RemotingClient() as c:
            assert (await create_topic(c, addr, "CfgSafe", 1)).code == OK
            before_conf = conf_file.read_text()
            before = (await c.invoke(addr, RemotingCommand.request(C.GET_BROKER_CONFIG, {}))).body_bytes
            for key, value in UNSAFE:
                r = await update(c, addr, f"{key}={value}\n")
                assert r.code == ResponseCode.SYSTEM_ERROR and key in (r.remark or ""), (key, value, r.remark)
            # one bad key in a batch refuses the whole batch
            r = await update(c, addr, "syncFlushTimeout=3000\nbrokerPermission=0\n")
            assert r.code == ResponseCode.SYSTEM_ERROR and "brokerPermission" in r.remark
            after = (await c.invoke(addr, RemotingCommand.request(C.GET_BROKER_CONFIG, {}))).body_bytes
            assert after == before and conf_file.read_text() == before_conf
            assert (await send(c, addr, "CfgSafe", b"still works", queue_id=0)).code == OK

            # what an operator does on purpose stays possible: a read-only broker (decommissioning), back
            assert (await update(c, addr, "brokerPermission=4\n")).code == OK
            try:
                assert (await send(c, addr, "CfgSafe", b"refused", queue_id=0)).code != OK
            finally:
                assert (await update(c, addr, "brokerPermission=6\n")).code == OK
            assert (await send(c, addr, "CfgSafe", b"writable again", queue_id=0)).code == OK
            r = await update(c, addr, "syncFlushTimeout=3000\nmaxMessageSize=1048576\n")
            assert r.code == OK, r.remark

    run(go())


@pytest.mark.parametrize(
    ("key", "value"), [("brokerPermission", "0"), ("syncFlushTimeout", "0"), ("maxMessageSize", "1")]
)
def test_a_bad_saved_value_is_a_clear_startup_error(tmp_path: Path, key: str, value: str) -> None:
    conf = write_conf(tmp_path / "b", {key: value})
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "broker", "-c", str(conf), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert str(conf) in out.stderr and f"{key}={value}" in out.stderr, out.stderr
    assert not (tmp_path / "b" / "store" / "commitlog").exists()  # refused before anything was created
