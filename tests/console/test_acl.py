"""The console of a standalone with aclEnable=true: a login is required, ACL accounts log in with their
access and secret keys and act with their own permissions, the ACL page lists accounts without secrets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.console.conftest import ConsoleApi
from tests.interop.standalone import Standalone, start_standalone, unique

ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: ops-admin
    secretKey: admin-secret-1
    admin: true
  - accessKey: app-user
    secretKey: user-secret-1
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture(scope="module")
def acl_sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    home = tmp_path_factory.mktemp("console-acl")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(ACL_YML)
    s = start_standalone(home, {"aclEnable": "true"}, console=True)
    yield s
    s.stop()


def login(base: str, user: str, secret: str) -> ConsoleApi:
    c = ConsoleApi(base)
    r = c.send("POST", "/api/login", {"username": user, "password": secret})
    assert r.status_code == 200, r.text
    c.session["csrf"] = r.json()["csrf"]
    return c


def test_acl_console_requires_a_login_with_acl_keys(acl_sa: Standalone) -> None:
    anon = ConsoleApi(acl_sa.console)
    try:
        assert anon.session["loginRequired"] and anon.session["aclEnabled"]
        assert anon.http.get("/api/topics").status_code == 401
        r = anon.send("POST", "/api/login", {"username": "app-user", "password": "wrong"})
        assert r.status_code == 401
    finally:
        anon.close()


def test_acl_accounts_act_with_their_own_permissions(acl_sa: Standalone) -> None:
    user = login(acl_sa.console, "app-user", "user-secret-1")
    admin = login(acl_sa.console, "ops-admin", "admin-secret-1")
    try:
        topic = unique("AclTopic")
        body = {"topic": topic, "clusterName": "DefaultCluster", "readQueueNums": 2, "writeQueueNums": 2}
        refused = user.wait_job(user.post("/api/topics", body)["job"])
        assert refused["state"] == "failed" and "[ACL]" in refused["error"], refused
        done = admin.wait_job(admin.post("/api/topics", body)["job"])
        assert done["state"] == "done", done
        assert topic in {t["topic"] for t in user.get("/api/topics")["topics"]}
        # a user with PUB on topics may send a test message through the console
        sent = user.post(f"/api/topics/{topic}/send", {"body": "from app-user"})
        assert sent["status"] == "SEND_OK"
        assert all(b["error"] is None and b["version"] for b in admin.get("/api/cluster")["brokers"])
        acl = admin.get("/api/acl")
        assert acl["aclEnabled"] and {a["accessKey"] for a in acl["accounts"]} == {"ops-admin", "app-user"}
        assert "secret" not in str(acl)
    finally:
        user.close()
        admin.close()
