"""`rocketq cluster --mode 2m-2s-async`: the seed's deployment as separate processes from the shipped
conf/2m-2s-async files; kill -9 a master from its printed pid and its messages are still read (from its
slave); SIGTERM stops everything cleanly. `controller` is a clear "not supported yet"."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.ha_support import topic_on, wait_until

from rocketq import ConsumeFromWhere, LitePullConsumer, Message, Producer, SendStatus
from rocketq.client.instance import ClientConfig

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_confs_are_rocketmqs():
    for mode, role in (("2m-2s-async", "ASYNC_MASTER"), ("2m-2s-sync", "SYNC_MASTER")):
        d = ROOT / "conf" / mode
        assert sorted(os.listdir(d)) == [f"broker-{x}.properties" for x in ("a-s", "a", "b-s", "b")]
        a = (d / "broker-a.properties").read_text()
        s = (d / "broker-a-s.properties").read_text()
        assert f"brokerRole={role}" in a and "brokerId=0" in a and "brokerName=broker-a" in a
        assert "brokerRole=SLAVE" in s and "brokerId=1" in s and "brokerName=broker-a" in s
        assert "slaveReadEnable=true" in s  # the seed's promise: consumers read from the slave
    assert sorted(os.listdir(ROOT / "conf" / "2m-noslave")) == ["broker-a.properties", "broker-b.properties"]


def test_controller_mode_is_not_supported_yet(tmp_path):
    r = subprocess.run([sys.executable, "-m", "rocketq.cli", "cluster", "--mode", "controller", "--home",
                        str(tmp_path)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 2 and "not supported yet" in r.stderr


def test_cluster_2m_2s_async_and_a_master_loss(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketq.cli", "cluster", "--mode", "2m-2s-async", "--home", str(tmp_path),
         "--namesrv-port", "0", "--base-port", "0", "--small-store"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "The cluster boot success" in line or len(lines) > 50:
                break
        out = "".join(lines)
        assert "The cluster boot success" in out, out
        ns = re.search(r"NameServer (127\.0\.0\.1:\d+)", out).group(1)
        rows = {
            m.group(1): m.groups()
            for m in re.finditer(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s", out, re.M)
        }
        assert rows["broker-a"][1] == "ASYNC_MASTER" and rows["broker-a-s"][1] == "SLAVE"
        for name in ("broker-a", "broker-b"):
            r = subprocess.run([sys.executable, "-m", "rocketq.cli", "admin", "updateTopic", "-n", ns, "-b",
                                rows[name][2], "-t", "CLUSTER_T", "-r", "2", "-w", "2"],
                               capture_output=True, text=True, timeout=60)  # fmt: skip
            assert r.returncode == 0, r.stdout + r.stderr
        wait_until(lambda: topic_on(rows["broker-a-s"][2], "CLUSTER_T"), 30, "the topic on broker-a-s")
        fast = ClientConfig(poll_name_server_interval=1.0)
        with Producer("PG_cluster", namesrv=ns, client_config=fast) as p:
            sent = {}
            for i in range(40):
                r = p.send(Message("CLUSTER_T", b"m%d" % i))
                assert r.status is SendStatus.SEND_OK
                sent[b"m%d" % i] = r.queue.broker_name
        assert set(sent.values()) == {"broker-a", "broker-b"}
        time.sleep(0.5)  # replication is asynchronous in this mode
        os.kill(int(rows["broker-a"][4]), signal.SIGKILL)
        got: set[bytes] = set()
        first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        with LitePullConsumer("CG_cluster", namesrv=ns, client_config=fast, consume_from_where=first) as c:
            c.subscribe("CLUSTER_T", "*")
            deadline = time.monotonic() + 60
            while set(sent) - got and time.monotonic() < deadline:
                got |= {bytes(m.body) for m in c.poll(timeout_ms=1000)}
        assert set(sent) <= got
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "broker-a (pid" in rest and "rocketq cluster shutdown." in rest
