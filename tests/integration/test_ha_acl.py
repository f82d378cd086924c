"""aclEnable=true on a master: its HA port streams only to slaves that prove an admin account of its
plain_acl.yml (rocketq's HA handshake); the slave's metadata calls are signed with
innerClientAuthenticationCredentials; a raw client cannot forge acknowledgements."""

from __future__ import annotations

import asyncio

from tests.integration.ha_support import (
    create_topic,
    ha_status,
    start_ha_cluster,
    topic_on,
    wait_until,
)

from rocketq import Message, Producer, SendStatus
from rocketq.client.acl import AclClientRPCHook
from rocketq.client.instance import ClientConfig

ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: rocketq2
    secretKey: "12345678"
    admin: true
  - accessKey: app
    secretKey: "87654321"
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


def creds(ak: str, sk: str) -> str:
    return f'{{"accessKey":"{ak}","secretKey":"{sk}"}}'


def test_only_authenticated_admin_slaves_replicate(tmp_path):
    c = start_ha_cluster(tmp_path)
    admin = AclClientRPCHook("rocketq2", "12345678")
    try:
        for name in ("m", "good", "bad"):
            (tmp_path / name / "conf").mkdir(parents=True)
            (tmp_path / name / "conf" / "plain_acl.yml").write_text(ACL_YML)
        m = c.add("m", "broker-a", "SYNC_MASTER", aclEnable="true", slaveTimeout="1000")
        create_topic(m.addr, "HA_ACL", 2, hook=admin)
        bad = c.add("bad", "broker-a", "SLAVE", 2, aclEnable="true",
                    innerClientAuthenticationCredentials=creds("rocketq2", "wrong-secret"))  # fmt: skip

        def refused() -> bool:
            return any("does not match" in d["reason"] for d in ha_status(m.addr, admin)["recentlyDropped"])

        wait_until(refused, 30, "the master to refuse the wrong secret")
        assert not ha_status(m.addr, admin)["haConnectionInfo"]
        app = ClientConfig(access_key="app", secret_key="87654321")
        with Producer("PG_ha_acl", namesrv=c.ns, client_config=app) as p:
            assert p.send(Message("HA_ACL", b"no slave yet")).status is SendStatus.SLAVE_NOT_AVAILABLE
            good = c.add("good", "broker-a", "SLAVE", 1, aclEnable="true",
                         innerClientAuthenticationCredentials=creds("rocketq2", "12345678"))  # fmt: skip
            wait_slave_attached_signed(m, admin)
            assert p.send(Message("HA_ACL", b"acked by the good slave")).status is SendStatus.SEND_OK
        conns = ha_status(m.addr, admin)["haConnectionInfo"]
        assert [x["accessKey"] for x in conns] == ["rocketq2"]
        wait_until(lambda: topic_on(good.addr, "HA_ACL", admin), 30, "the signed metadata sync")
        st = ha_status(bad.addr, admin)["haClientRuntimeInfo"]
        assert st["state"] != "transfer" and bad.proc.alive()

        async def forge() -> bool:  # a classic ack from a raw client: dropped, acknowledges nothing
            r, w = await asyncio.open_connection("127.0.0.1", m.ha_port)
            w.write((1 << 40).to_bytes(8, "big"))
            closed = await asyncio.wait_for(r.read(), 10) == b""
            w.close()
            return closed

        assert asyncio.run(forge())
    finally:
        c.close()


def wait_slave_attached_signed(master, hook) -> None:
    wait_until(
        lambda: any(x["state"] == "transfer" for x in ha_status(master.addr, hook)["haConnectionInfo"]),
        30,
        "the authenticated slave",
    )
