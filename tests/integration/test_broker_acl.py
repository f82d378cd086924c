"""aclEnable=true: signed requests, account permissions (RocketMQ plain ACL), startup errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.integration.broker_support import create_topic, pull, run, send, start_cluster, write_conf

from rocketq.client.acl import AclClientRPCHook
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: true
  - accessKey: user
    secretKey: "87654321"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["T1=PUB|SUB", "T3=SUB"]
    groupPerms: ["G1=SUB"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("broker-acl")
    (home / "broker" / "conf").mkdir(parents=True)
    (home / "broker" / "conf" / "plain_acl.yml").write_text(ACL_YML)
    c = start_cluster(home, aclEnable="true")
    yield c
    c.stop()


def test_acl_permissions(cluster):
    addr = cluster.addr

    async def go():
        async with (
            RemotingClient() as anon,
            RemotingClient(rpc_hook=AclClientRPCHook("RocketMQ", "12345678")) as admin,
            RemotingClient(rpc_hook=AclClientRPCHook("user", "87654321")) as user,
            RemotingClient(rpc_hook=AclClientRPCHook("user", "wrong-secret")) as forger,
        ):
            r = await create_topic(anon, addr, "T1", 1)
            assert r.code != ResponseCode.SUCCESS and "AccessKey" in r.remark
            for t in ("T1", "T2", "T3"):
                assert (await create_topic(admin, addr, t, 1)).code == ResponseCode.SUCCESS
            r = await create_topic(user, addr, "T4", 1)
            assert r.code != ResponseCode.SUCCESS and "admin" in r.remark
            assert (await send(user, addr, "T1", b"ok", queue_id=0)).code == ResponseCode.SUCCESS
            r = await send(user, addr, "T2", b"no", queue_id=0)
            assert r.code != ResponseCode.SUCCESS and "PUB" in r.remark and "T2" in r.remark
            r = await send(user, addr, "T3", b"no", queue_id=0)  # SUB only
            assert r.code != ResponseCode.SUCCESS
            r = await send(forger, addr, "T1", b"x", queue_id=0)
            assert r.code != ResponseCode.SUCCESS and "signature" in r.remark
            p = await pull(user, addr, "G1", "T1", 0, 0)
            assert p.code == ResponseCode.SUCCESS
            p = await pull(user, addr, "G2", "T1", 0, 0)
            assert p.code != ResponseCode.SUCCESS and "group G2" in p.remark
            p = await pull(user, addr, "G1", "T2", 0, 0)
            assert p.code != ResponseCode.SUCCESS
            # admin may do anything
            assert (await send(admin, addr, "T2", b"admin", queue_id=0)).code == ResponseCode.SUCCESS
            # by UNIQ_KEY: _UNIQUE_KEY_QUERY may or may not be signed (Java signs header fields only)
            q = {"topic": "T1", "key": "none", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "1",
                 "_UNIQUE_KEY_QUERY": "true"}  # fmt: skip
            r = await user.invoke(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, q))
            assert r.code == ResponseCode.QUERY_NOT_FOUND, r.remark

    run(go())


def test_acl_enabled_without_file_is_a_startup_error(tmp_path):
    conf = write_conf(tmp_path / "b", {"aclEnable": "true"})
    env_free = {k: v for k, v in __import__("os").environ.items() if not k.startswith("ROCKETMQ_")}
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "broker", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_free,
    )
    assert out.returncode == 2
    assert "plain_acl.yml" in out.stderr
