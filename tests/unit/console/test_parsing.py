"""The console's pure parts: account files, sessions, login throttling, topic types, trace records, bodies,
config rules, and the API description."""

from __future__ import annotations

import base64
import time

import pytest

from rocketq.admin.console_ops import decode_traces
from rocketq.console.api_consumers import is_system_group
from rocketq.console.auth import (
    MAX_FAILURES,
    ROLE_ACL,
    ROLE_ADMIN,
    ROLE_USER,
    AccountStore,
    LoginThrottle,
    Sessions,
    parse_acl,
    parse_users,
)
from rocketq.console.config import ConsoleConfig, ConsoleConfigError, is_loopback
from rocketq.console.routes import API, ApiError, Param
from rocketq.console.server import load_static
from rocketq.console.topics import message_type, topic_kind
from rocketq.console.views import body_fields

ACL = """
globalWhiteRemoteAddresses: ["10.10.103.*"]
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.0.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["topicA=DENY", "topicB=PUB|SUB"]
  - accessKey: rocketmq2
    secretKey: "87654321"
    admin: true
"""


def test_users_properties_like_the_dashboard() -> None:
    users = parse_users("# comment\nadmin=admin,1\nuser1=user1\n  bad line\nx=a=b,0\n")
    assert users["admin"].role == ROLE_ADMIN and users["admin"].password == "admin"
    assert users["user1"].role == ROLE_USER and users["user1"].password == "user1"
    assert users["x"].password == "a=b" and users["x"].role == ROLE_USER


def test_acl_accounts_log_in_and_secrets_are_not_shown() -> None:
    accounts, view = parse_acl(ACL)
    assert accounts["RocketMQ"].role == ROLE_ACL and accounts["rocketmq2"].role == ROLE_ADMIN
    assert view.global_white == ["10.10.103.*"]
    assert "12345678" not in repr(view) and all("secretKey" not in a for a in view.accounts)
    assert view.accounts[0]["topicPerms"] == ["topicA=DENY", "topicB=PUB|SUB"]


def test_account_store_rereads_a_changed_file(tmp_path) -> None:
    f = tmp_path / "users.properties"
    f.write_text("a=one,1\n")
    store = AccountStore(str(f), None)
    assert store.check("a", "one") and not store.check("a", "two") and not store.check("b", "one")
    f.write_text("a=two,1\n")
    import os

    os.utime(f, (time.time() + 5, time.time() + 5))
    assert store.check("a", "two") and not store.check("a", "one")


def test_sessions_expire_and_are_bounded() -> None:
    s = Sessions(idle_s=0.05, max_sessions=3)
    first = s.new(None)
    assert s.get(first.sid) is first and first.csrf != first.sid
    time.sleep(0.1)
    assert s.get(first.sid) is None
    ids = [s.new(None).sid for _ in range(5)]
    assert s.get(ids[0]) is None and s.get(ids[-1]) is not None


def test_throttle_blocks_after_failures_then_forgets_on_success() -> None:
    t = LoginThrottle()
    for _ in range(MAX_FAILURES):
        assert t.retry_after("1.2.3.4|u") == 0
        t.failed("1.2.3.4|u")
    assert t.retry_after("1.2.3.4|u") > 0 and t.retry_after("1.2.3.4|v") == 0
    t.succeeded("1.2.3.4|u")
    assert t.retry_after("1.2.3.4|u") == 0


def test_topic_kinds() -> None:
    info = {"clusterAddrTable": {"DefaultCluster": ["broker-a"]}, "brokerAddrTable": {"broker-a": {}}}
    assert topic_kind("%RETRY%g", None, info) == "RETRY"
    assert topic_kind("%DLQ%g", None, info) == "DLQ"
    for t in ("TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "rmq_sys_x", "DefaultCluster",
              "broker-a", "DefaultCluster_REPLY_TOPIC"):  # fmt: skip
        assert topic_kind(t, None, info) == "SYSTEM", t
    assert topic_kind("Orders", {"attributes": {"message.type": "DELAY"}}, info) == "DELAY"
    assert topic_kind("Orders", {"order": True}, info) == "FIFO"
    assert message_type({"attributes": {"message.type": "bogus"}}) == "NORMAL"
    assert topic_kind("Orders", None, info) == "NORMAL"


def test_trace_records_of_rocketmq_format() -> None:
    pub = "\x01".join(["Pub", "1000", "DefaultRegion", "PG", "T", "ID1", "tag", "k1 k2", "1.2.3.4:10911",
                       "5", "3", "0", "OFF1", "true"]) + "\x02"  # fmt: skip
    before = "\x01".join(["SubBefore", "1010", "DefaultRegion", "CG", "R1", "ID1", "0", "k1"]) + "\x02"
    after = "\x01".join(["SubAfter", "R1", "ID1", "7", "false", "k1", "4", "1020", "CG"]) + "\x02"
    events = decode_traces((pub + before + after + "garbage\x01x\x02").encode())
    assert [e.kind for e in events] == ["Pub", "SubBefore", "SubAfter"]
    p, b, a = events
    assert (p.group, p.topic, p.cost_ms, p.success, p.offset_msg_id) == ("PG", "T", 3, True, "OFF1")
    assert (b.group, b.request_id) == ("CG", "R1")
    assert (a.timestamp, a.group, a.success, a.cost_ms, a.context_code) == (1020, "CG", False, 7, 4)


def test_bodies_go_out_as_text_or_base64() -> None:
    assert body_fields(b"<b>hi</b>") == {"bodyLength": 9, "bodyTruncated": False, "body": "<b>hi</b>"}
    raw = bytes([0xFF, 0xFE, 0x00])
    out = body_fields(raw)
    assert "body" not in out and base64.b64decode(out["bodyBase64"]) == raw
    long = "é" * 10
    cut = body_fields(long.encode(), limit=5)
    assert cut["bodyTruncated"] and cut["body"] == "éé"


def test_login_is_required_off_loopback_and_needs_accounts() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("")
    assert not ConsoleConfig("ns:9876").needs_login()
    assert ConsoleConfig("ns:9876", host="0.0.0.0").needs_login()
    assert ConsoleConfig("ns:9876", acl_enabled=True).needs_login()
    with pytest.raises(ConsoleConfigError, match="users-file"):
        ConsoleConfig("ns:9876", host="0.0.0.0").check()
    ConsoleConfig("ns:9876", host="0.0.0.0", users_file="u.properties").check()
    with pytest.raises(ConsoleConfigError, match="without a login"):
        ConsoleConfig("ns:9876", host="0.0.0.0", users_file="u", login_required=False).check()
    assert not ConsoleConfig("ns:9876", users_file="u", login_required=False).needs_login()


def test_params_are_checked() -> None:
    with pytest.raises(ApiError):
        Param("topic", "name").convert("a/b")
    with pytest.raises(ApiError):
        Param("n", "integer").convert("x")
    with pytest.raises(ApiError):
        Param("t", max_len=3).convert("abcd")
    assert Param("b", "boolean").convert("true") is True


def test_every_changing_endpoint_is_documented_with_the_csrf_header() -> None:
    doc = API.openapi("t", "0")
    for ep in API.endpoints:
        op = doc["paths"][ep.path][ep.method.lower()]
        assert op["summary"]
        if ep.method != "GET":
            assert ep.admin and any(p["name"] == "X-CSRF-Token" for p in op["parameters"])


def test_static_files_are_a_fixed_table() -> None:
    files = load_static()
    assert "/static/index.html" in files and "/static/js/app.js" in files
    assert "/static/vendor/uPlot.iife.min.js" in files and "/static/vendor/uPlot.LICENSE.txt" in files
    assert all(k.startswith("/static/") and ".." not in k for k in files)
    assert files["/static/js/app.js"][1] == "text/javascript"
    # no page script builds markup from strings
    for path, (body, _) in files.items():
        if path.startswith("/static/js/"):
            text = body.decode()
            assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "eval(" not in text, path


def test_the_brokers_own_groups_are_system_groups() -> None:
    for g in (
        "TOOLS_CONSUMER",
        "DEFAULT_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "CID_RMQ_SYS_X",
        "_INNER_TRACE_PRODUCER-a",
    ):
        assert is_system_group(g), g
    assert not is_system_group("order-service")
