"""Issue 33 items 5, 6, 7: NameServer authentication, replay refusal, the audit log and the bounded KV config.

A NameServer with authenticationEnabled=true (RocketMQ 5's keys) and a broker that signs its registration
with innerClientAuthenticationCredentials; requests signed the way Apache's AclClientRPCHook signs them
(SigningHook without a stamp: byte for byte the same extFields and signature) and the way rocketq's own
signers do (stamped with rqSignedAt). A second NameServer with authentication off logs who changed what.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.procs import start_namesrv_with_conf
from tests.integration.broker_support import TEST_CONF, create_topic, run, start_broker

from rocketq.client.acl import AclClientRPCHook
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient
from rocketq.remoting.acl_signature import SIGNED_AT, STAMPED_CODES, SigningHook

C = RequestCode
INNER = {"accessKey": "broker-inner", "secretKey": "inner-secret-1"}
ADMIN = {"username": "ops", "password": "ops-password-1"}
KV_MAX_ENTRIES = 5
ACL_YML = """\
accounts:
  - accessKey: ops
    secretKey: "ops-password-1"
    admin: true
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("namesrv-auth")
    ns = start_namesrv_with_conf(
        home / "ns",
        {
            "authenticationEnabled": "true",
            "innerClientAuthenticationCredentials": json.dumps(INNER),
            "initAuthenticationUser": json.dumps(ADMIN),
            "authReplayWindowSeconds": "60",
            "kvConfigMaxEntries": str(KV_MAX_ENTRIES),
        },
    )
    open_ns = start_namesrv_with_conf(home / "ns-open", {})
    (home / "broker" / "conf").mkdir(parents=True)
    (home / "broker" / "conf" / "plain_acl.yml").write_text(ACL_YML)
    procs = [ns, open_ns]
    try:
        broker = start_broker(
            home / "broker",
            f"{ns.addr};{open_ns.addr}",
            {
                **TEST_CONF,
                "brokerName": "broker-auth",
                "innerClientAuthenticationCredentials": json.dumps(INNER),
                "aclEnable": "true",
            },
        )
        procs.append(broker)
        yield {"ns": ns, "open_ns": open_ns, "broker": broker, "home": home}
    finally:
        for p in reversed(procs):
            p.stop()


def apache_hook(ak: str, sk: str) -> SigningHook:
    """Signs as Apache's AclClientRPCHook does: no rqSignedAt."""
    return SigningHook(ak, sk)


async def invoke(addr: str, code: int, ext: dict[str, str], body: bytes = b"", hook=None) -> RemotingCommand:
    async with RemotingClient(rpc_hook=hook) as c:
        return await c.invoke(addr, RemotingCommand.request(code, dict(ext), body), 10.0)


async def send_raw(addr: str, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
    """Sends ext exactly as given (a captured request replayed: no hook touches it)."""
    return await invoke(addr, code, ext, body)


def signed_ext(code: int, ext: dict[str, str], hook: SigningHook, body: bytes = b"") -> dict[str, str]:
    req = RemotingCommand.request(code, dict(ext), body)
    hook.do_before_request("", req)
    return dict(req.ext_fields)


async def route(addr: str, topic: str) -> RemotingCommand:
    return await invoke(addr, C.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def wait_route(addr: str, topic: str, broker_name: str, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = run(route(addr, topic))
        if r.code == ResponseCode.SUCCESS and broker_name.encode() in r.body_bytes:
            return json.loads(r.body_bytes)
        assert time.monotonic() < deadline, f"no route of {topic} via {broker_name}: {r.code} {r.remark}"
        time.sleep(0.2)


def register_ext(name: str, addr: str) -> dict[str, str]:
    return {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": addr,
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": "0",
    }


def fake_register_body(topic: str) -> bytes:
    return json.dumps(
        {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": 1, "timestamp": 1},
                "topicConfigTable": {
                    topic: {"topicName": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
                },
            },
        }
    ).encode()


def test_signed_broker_registers_and_reads_stay_open(env: dict) -> None:
    ns, broker = env["ns"], env["broker"]
    admin = AclClientRPCHook(ADMIN["username"], ADMIN["password"])

    async def go() -> None:
        async with RemotingClient(rpc_hook=admin) as c:
            assert (await create_topic(c, broker.addr, "AuthTopic", 2)).code == ResponseCode.SUCCESS

    run(go())
    data = wait_route(ns.addr, "AuthTopic", "broker-auth")  # read unsigned: routes stay open
    assert data["brokerDatas"][0]["brokerName"] == "broker-auth"


def test_unsigned_and_forged_changes_are_refused(env: dict) -> None:
    ns, broker = env["ns"], env["broker"]
    wait_route(ns.addr, "AuthTopic", "broker-auth")
    forger = apache_hook(INNER["accessKey"], "not-the-secret")
    stranger = apache_hook("nobody", "whatever-secret")
    attempts = [
        (C.REGISTER_BROKER, register_ext("evil", "127.0.0.1:1"), fake_register_body("AuthTopic")),
        (C.UNREGISTER_BROKER, {**register_ext("broker-auth", broker.addr)}, b""),
        (C.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-auth"}, b""),
        (C.DELETE_TOPIC_IN_NAMESRV, {"topic": "AuthTopic"}, b""),
        (C.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"}, b""),
        (C.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=false"),
        (C.GET_NAMESRV_CONFIG, {}, b""),
    ]

    async def go() -> None:
        for code, ext, body in attempts:
            for hook, why in ((None, "AccessKey"), (forger, "signature"), (stranger, "unknown AccessKey")):
                r = await invoke(ns.addr, code, ext, body, hook)
                assert r.code != ResponseCode.SUCCESS, (code, why)
                assert why in (r.remark or ""), (code, r.remark)

    run(go())
    data = wait_route(ns.addr, "AuthTopic", "broker-auth")
    assert [b["brokerName"] for b in data["brokerDatas"]] == ["broker-auth"]  # no fake broker
    assert all(q["perm"] & 2 for q in data["queueDatas"])  # still writable


def test_apache_style_signed_admin_change_then_replays_are_refused(env: dict) -> None:
    ns = env["ns"]
    wait_route(ns.addr, "AuthTopic", "broker-auth")
    hook = apache_hook(ADMIN["username"], ADMIN["password"])
    wipe = signed_ext(C.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-auth"}, hook)
    assert SIGNED_AT not in wipe

    async def go() -> None:
        r = await send_raw(ns.addr, C.WIPE_WRITE_PERM_OF_BROKER, wipe)
        assert r.code == ResponseCode.SUCCESS, r.remark
        data = json.loads((await route(ns.addr, "AuthTopic")).body_bytes)
        assert not any(q["perm"] & 2 for q in data["queueDatas"])
        # the captured request, sent again: refused
        r = await send_raw(ns.addr, C.WIPE_WRITE_PERM_OF_BROKER, wipe)
        assert r.code != ResponseCode.SUCCESS and "replayed" in (r.remark or ""), r.remark
        # the same signed fields under another code (the code is not signed): refused as well
        r = await send_raw(ns.addr, C.ADD_WRITE_PERM_OF_BROKER, wipe)
        assert r.code != ResponseCode.SUCCESS and "replayed" in (r.remark or ""), r.remark
        # the opposite change signed the Apache way has the very same signature: refused within the window
        add = signed_ext(C.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-auth"}, hook)
        assert add["Signature"] == wipe["Signature"]
        r = await send_raw(ns.addr, C.ADD_WRITE_PERM_OF_BROKER, add)
        assert r.code != ResponseCode.SUCCESS and "replayed" in (r.remark or ""), r.remark
        # rocketq's signers bind the time and the code: that one goes through
        stamped = AclClientRPCHook(ADMIN["username"], ADMIN["password"])
        add = signed_ext(C.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-auth"}, stamped)
        assert (await send_raw(ns.addr, C.ADD_WRITE_PERM_OF_BROKER, add)).code == ResponseCode.SUCCESS
        r = await send_raw(ns.addr, C.WIPE_WRITE_PERM_OF_BROKER, add)  # a stamped request under another code
        assert r.code != ResponseCode.SUCCESS and "signed for request code" in (r.remark or ""), r.remark
        data = json.loads((await route(ns.addr, "AuthTopic")).body_bytes)
        assert all(q["perm"] & 2 for q in data["queueDatas"])
        # characters moved between adjacent signed fields keep the signature: refused as a replay
        put = signed_ext(C.PUT_KV_CONFIG, {"namespace": "NSa", "key": "bc", "value": "v1"}, hook)
        assert (await send_raw(ns.addr, C.PUT_KV_CONFIG, put)).code == ResponseCode.SUCCESS
        shifted = {**put, "key": "bcN", "namespace": "Sa"}  # sorted: key, namespace: "bc"+"NSa" = "bcN"+"Sa"
        r = await send_raw(ns.addr, C.PUT_KV_CONFIG, shifted)
        assert r.code != ResponseCode.SUCCESS and "replayed" in (r.remark or ""), r.remark
        get = await invoke(ns.addr, C.GET_KV_CONFIG, {"namespace": "Sa", "key": "bcN"})
        assert get.code == ResponseCode.QUERY_NOT_FOUND
        # a route read signed by the operator, sent again as DELETE_TOPIC_IN_NAMESRV (same fields): refused
        read = signed_ext(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "AuthTopic"}, hook)
        assert (await send_raw(ns.addr, C.GET_ROUTEINFO_BY_TOPIC, read)).code == ResponseCode.SUCCESS
        r = await send_raw(ns.addr, C.DELETE_TOPIC_IN_NAMESRV, read)
        assert r.code != ResponseCode.SUCCESS and "replayed" in (r.remark or ""), r.remark
        assert (await route(ns.addr, "AuthTopic")).code == ResponseCode.SUCCESS

    run(go())


def test_stamped_requests_expire(env: dict) -> None:
    ns = env["ns"]
    old = SigningHook(
        ADMIN["username"], ADMIN["password"], stamp_codes=STAMPED_CODES, clock=lambda: time.time() - 3600
    )
    fresh = AclClientRPCHook(ADMIN["username"], ADMIN["password"])

    async def go() -> None:
        ext = {"namespace": "NS2", "key": "k", "value": "v"}
        r = await invoke(ns.addr, C.PUT_KV_CONFIG, ext, hook=old)  # signed an hour ago
        assert r.code != ResponseCode.SUCCESS and "clock" in (r.remark or ""), r.remark
        r = await invoke(ns.addr, C.PUT_KV_CONFIG, ext, hook=fresh)
        assert r.code == ResponseCode.SUCCESS, r.remark

    run(go())


def test_config_read_hides_the_secrets(env: dict) -> None:
    hook = AclClientRPCHook(ADMIN["username"], ADMIN["password"])
    r = run(invoke(env["ns"].addr, C.GET_NAMESRV_CONFIG, {}, hook=hook))
    assert r.code == ResponseCode.SUCCESS
    text = r.body_bytes.decode()
    assert "authenticationEnabled=true" in text
    assert INNER["secretKey"] not in text and ADMIN["password"] not in text


def test_broker_config_read_hides_the_secret(env: dict) -> None:
    hook = AclClientRPCHook(ADMIN["username"], ADMIN["password"])
    r = run(invoke(env["broker"].addr, C.GET_BROKER_CONFIG, {}, hook=hook))
    assert r.code == ResponseCode.SUCCESS
    text = r.body_bytes.decode()
    assert "innerClientAuthenticationCredentials=******" in text and INNER["secretKey"] not in text


def test_mqadmin_signs_with_tools_yml(env: dict, tmp_path: Path) -> None:
    ns = env["ns"]
    args = [sys.executable, "-m", "rocketq.cli", "admin", "updateKvConfig", "-n", ns.addr]
    args += ["-s", "NS3", "-k", "key", "-v", "value"]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=60, env={**os.environ})
    assert plain.returncode != 0 and "AccessKey" in plain.stderr + plain.stdout
    tools = tmp_path / "tools.yml"
    tools.write_text(f"accessKey: {ADMIN['username']}\nsecretKey: {ADMIN['password']}\n")
    signed = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ROCKETMQ_TOOLS_FILE": str(tools)},
    )
    assert signed.returncode == 0, signed.stderr
    r = run(invoke(ns.addr, C.GET_KV_CONFIG, {"namespace": "NS3", "key": "key"}))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields.get("value") == "value"


def test_kv_config_is_bounded(env: dict) -> None:
    ns = env["ns"]
    hook = AclClientRPCHook(ADMIN["username"], ADMIN["password"])

    async def go() -> list[RemotingCommand]:
        async with RemotingClient(rpc_hook=hook) as c:
            return await asyncio.gather(
                *(
                    c.invoke(
                        ns.addr,
                        RemotingCommand.request(
                            C.PUT_KV_CONFIG, {"namespace": "BOUND", "key": f"k{i}", "value": "v"}
                        ),
                        10.0,
                    )
                    for i in range(KV_MAX_ENTRIES + 5)
                )
            )

    resps = run(go())
    full = [r for r in resps if r.code != ResponseCode.SUCCESS]
    assert full, "the KV config took more entries than kvConfigMaxEntries"
    assert all(f"kvConfigMaxEntries={KV_MAX_ENTRIES}" in (r.remark or "") for r in full), full[0].remark


def test_broker_acl_refuses_replayed_admin_requests(env: dict) -> None:
    broker = env["broker"]
    hook = apache_hook(ADMIN["username"], ADMIN["password"])
    ext = {
        "topic": "ReplayTopic",
        "defaultTopic": "TBW102",
        "readQueueNums": "1",
        "writeQueueNums": "1",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    signed = signed_ext(C.UPDATE_AND_CREATE_TOPIC, ext, hook)

    async def go() -> None:
        assert (await send_raw(broker.addr, C.UPDATE_AND_CREATE_TOPIC, signed)).code == ResponseCode.SUCCESS
        r = await send_raw(broker.addr, C.UPDATE_AND_CREATE_TOPIC, signed)
        assert r.code != ResponseCode.SUCCESS and "replayed" in (r.remark or ""), r.remark

    run(go())


def test_open_namesrv_keeps_rocketmq_behaviour_and_logs_who_changed_what(env: dict) -> None:
    ns, broker = env["open_ns"], env["broker"]
    wait_route(ns.addr, "AuthTopic", "broker-auth")

    async def go() -> None:
        r = await invoke(ns.addr, C.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-auth"})
        assert r.code == ResponseCode.SUCCESS
        r = await invoke(ns.addr, C.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-auth"})
        assert r.code == ResponseCode.SUCCESS

    run(go())
    log_file = env["home"] / "ns-open" / "logs" / "rocketmqlogs" / "namesrv.log"  # INFO goes to the file
    deadline = time.monotonic() + 10
    while "ADD_WRITE_PERM_OF_BROKER" not in log_file.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    audit = [ln for ln in log_file.read_text().splitlines() if "rocketq.namesrv.audit" in ln]
    wipe = [ln for ln in audit if "WIPE_WRITE_PERM_OF_BROKER" in ln]
    assert wipe and "brokerName=broker-auth" in wipe[0] and "127.0.0.1:" in wipe[0], audit
    assert "unauthenticated" in wipe[0]
    # the broker's registrations (every few seconds here) are logged once, not each time
    assert len([ln for ln in audit if "REGISTER_BROKER" in ln and broker.addr in ln]) == 1, audit
