"""The console's JSON API with an HTTP client, against a real standalone with real traffic: lag as
consumerProgress computes it, topic and group changes as jobs, messages by key / id / time, request guards."""

from __future__ import annotations

import uuid

import httpx

from rocketq import Message, Producer
from tests.console.conftest import (
    ConsoleApi,
    Received,
    consumer,
    lagging_group,
    mqadmin_ok,
    new_topic,
    wait_until,
)
from tests.interop.standalone import Standalone, rows, unique


def test_lag_is_what_consumer_progress_counts(sa: Standalone, api: ConsoleApi, producer: Producer) -> None:
    topic, group, lag = lagging_group(sa, producer)
    groups = {g["group"]: g for g in api.get("/api/consumers")["groups"]}
    g = groups[group]
    assert g["lag"] == lag and g["diffTotal"] == lag and g["retryLag"] == 0
    assert g["state"] == "OFFLINE" and g["clients"] == 0
    detail = api.get(f"/api/consumers/{group}")
    queues = [q for q in detail["progress"]["queues"] if q["topic"] == topic]
    assert len(queues) == 4
    assert sum(q["brokerOffset"] for q in queues) == 24 + 13
    assert sum(q["consumerOffset"] for q in queues) == 24
    for q in queues:
        assert q["diff"] == q["brokerOffset"] - q["consumerOffset"] >= 0
        assert q["lastTimestamp"] > 0 or q["consumerOffset"] == 0
    # the same figure as `mqadmin consumerProgress -g GROUP` prints
    out = mqadmin_ok(sa.namesrv, "consumerProgress", "-g", group)
    assert f"Diff Total: {lag}" in out
    assert sum(int(r["Diff"]) for r in rows(out) if r["Topic"] == topic) == lag
    # the topic's page: the group and its lag on that topic
    on_topic = {x["group"]: x for x in api.get(f"/api/topics/{topic}/consumers")["groups"]}
    assert on_topic[group]["lag"] == lag


def test_a_group_without_offsets_has_no_lag_not_minus_one(sa: Standalone, api: ConsoleApi) -> None:
    group = unique("fresh_cg")
    job = api.post("/api/consumers", {"group": group, "clusterName": "DefaultCluster", "retryMaxTimes": 3})
    assert api.wait_job(job["job"])["state"] == "done"
    g = {x["group"]: x for x in api.get("/api/consumers")["groups"]}[group]
    assert g["lag"] is None and g["state"] == "NO_OFFSETS"
    assert g["config"]["retryMaxTimes"] == 3
    assert api.get(f"/api/consumers/{group}")["progress"]["queues"] == []
    job = api.send("DELETE", f"/api/consumers/{group}").json()
    assert api.wait_job(job["job"])["state"] == "done"
    assert group not in {x["group"] for x in api.get("/api/consumers")["groups"]}


def test_online_group_lag_drains_and_skip_backlog_moves_to_the_end(
    sa: Standalone, api: ConsoleApi, producer: Producer
) -> None:
    topic = new_topic(sa.namesrv, 2, prefix="Live")
    group = unique("live_cg")
    got = Received()
    c = consumer(sa, group, topic, got)
    try:
        for i in range(10):
            producer.send(Message(topic, f"m{i}".encode()))
        got.wait_for(lambda ms: len(ms) >= 10)

        def drained() -> dict | None:
            g = api.get(f"/api/consumers/{group}")
            return g if g["lag"] == 0 and g["clients"] == 1 else None

        g = wait_until(drained, what="lag 0 with one client online")
        assert g["state"] == "ONLINE"
        conns = api.get(f"/api/consumers/{group}/connections")
        assert conns["online"] and len(conns["connections"]) == 1
        assert conns["subscriptions"][0]["topic"] in (topic, f"%RETRY%{group}")
        info = api.get(f"/api/consumers/{group}/running-info", clientId=conns["connections"][0]["clientId"])
        assert {q["topic"] for q in info["mqTable"]} >= {topic}
    finally:
        c.shutdown()
    for i in range(7):
        producer.send(Message(topic, f"late{i}".encode()))
    assert api.get(f"/api/consumers/{group}")["lag"] == 7
    job = api.post(f"/api/topics/{topic}/skip-backlog", {"group": group})
    done = api.wait_job(job["job"])
    assert done["state"] == "done" and done["done"] == 2  # one line per queue
    assert api.get(f"/api/consumers/{group}")["lag"] == 0


def test_topic_create_send_status_delete(sa: Standalone, api: ConsoleApi) -> None:
    topic = f"ConsoleFifo_{uuid.uuid4().hex[:8]}"
    job = api.post(
        "/api/topics",
        {"topic": topic, "clusterName": "DefaultCluster", "readQueueNums": 3, "writeQueueNums": 3,
         "messageType": "FIFO"},
    )  # fmt: skip
    j = api.wait_job(job["job"])
    assert j["state"] == "done" and j["result"]["routed"], j
    listed = {t["topic"]: t for t in api.get("/api/topics", type="FIFO")["topics"]}
    assert listed[topic]["readQueueNums"] == 3 and listed[topic]["perm"] == "RW"
    sent = api.post(f"/api/topics/{topic}/send", {"body": "hello console", "tags": "T", "keys": "k1"})
    assert sent["status"] == "SEND_OK"
    status = api.get(f"/api/topics/{topic}/status")
    assert sum(q["messages"] for q in status["queues"]) == 1
    found = api.get("/api/messages/by-id", msgId=sent["msgId"], topic=topic)["messages"]
    assert found and found[0]["bodyPreview"] == "hello console"
    route = api.get(f"/api/topics/{topic}/route")
    assert route["queueDatas"][0]["readQueueNums"] == 3
    job = api.send("DELETE", f"/api/topics/{topic}").json()
    assert api.wait_job(job["job"])["state"] == "done"
    assert topic not in {t["topic"] for t in api.get("/api/topics")["topics"]}
    assert api.http.get(f"/api/topics/{topic}/route").status_code == 404


def test_messages_by_key_time_and_id_keep_the_body_as_sent(
    sa: Standalone, api: ConsoleApi, producer: Producer
) -> None:
    topic = new_topic(sa.namesrv, 2, prefix="Msg")
    body = '<img src=x onerror="alert(1)"> & <script>alert(2)</script>'
    r = producer.send(Message(topic, body.encode(), keys=["K-<b>"], tags="T", properties={"p": "<i>x</i>"}))
    producer.send(Message(topic, bytes(range(256))))  # not UTF-8: base64 in the detail
    by_key = wait_until(  # the broker indexes keys shortly after the append
        lambda: api.get("/api/messages/by-key", topic=topic, key="K-<b>")["messages"], what="the key indexed"
    )
    assert [m["msgId"] for m in by_key] == [r.msg_id]
    detail = api.get("/api/messages/detail", offsetMsgId=r.offset_msg_id)
    assert detail["body"] == body and detail["properties"]["p"] == "<i>x</i>"
    assert detail["keys"] == "K-<b>"

    def both() -> list | None:
        msgs = api.get("/api/messages", topic=topic)["messages"]
        return msgs if len(msgs) == 2 else None

    by_time = wait_until(both, what="both messages in the time range")
    binary = next(m for m in by_time if m["msgId"] != r.msg_id)
    d2 = api.get("/api/messages/detail", offsetMsgId=binary["offsetMsgId"])
    assert "body" not in d2 and d2["bodyBase64"] and d2["bodyLength"] == 256


def test_offset_ids_of_other_hosts_are_refused_without_connecting(api: ConsoleApi) -> None:
    # 10.1.2.3:4567, offset 0: a well-formed offsetMsgId that names no broker of this cluster
    foreign = "0A010203000011D70000000000000000"
    r = api.http.get("/api/messages/detail", params={"offsetMsgId": foreign})
    assert r.status_code == 404 and "10.1.2.3:4567" in r.json()["error"]
    r = api.send("POST", "/api/messages/resend", {"offsetMsgId": foreign, "group": "g"})
    assert r.status_code == 404
    assert api.http.get("/api/messages/detail", params={"offsetMsgId": "../../etc"}).status_code == 400


def test_csrf_origin_and_content_type_are_checked(sa: Standalone, api: ConsoleApi) -> None:
    body = {"group": unique("csrf_cg"), "clusterName": "DefaultCluster"}
    # no token, wrong token, another origin, a form post: refused, nothing created
    assert api.http.post("/api/consumers", json=body).status_code == 403
    assert api.http.post("/api/consumers", json=body, headers={"X-CSRF-Token": "x"}).status_code == 403
    r = api.http.post(
        "/api/consumers", json=body, headers={"X-CSRF-Token": api.csrf, "Origin": "http://evil.example"}
    )
    assert r.status_code == 403
    r = api.http.post(
        "/api/consumers",
        content=b"group=x",
        headers={"X-CSRF-Token": api.csrf, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 415
    # a fresh client has no session: its token from another session is worth nothing
    with httpx.Client(base_url=sa.console) as other:
        r = other.post("/api/consumers", json=body, headers={"X-CSRF-Token": api.csrf})
        assert r.status_code == 403
    assert body["group"] not in {g["group"] for g in api.get("/api/consumers")["groups"]}


def test_guards_headers_host_size_and_names(sa: Standalone, api: ConsoleApi) -> None:
    r = api.http.get("/")
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert api.http.get("/api/session", headers={"Host": "attacker.example"}).status_code == 421
    big = {"body": "x" * (2 * 1024 * 1024)}
    assert api.send("POST", "/api/topics/TopicA/send", big).status_code == 413
    assert api.http.get("/api/messages", params={"topic": "a/b"}).status_code == 400
    assert api.http.get("/static/../../etc/passwd").status_code == 404
    assert api.http.get("/static/%2e%2e/%2e%2e/etc/passwd").status_code == 404
    assert api.http.get("/api/no-such-thing").status_code == 404
    assert api.http.get("/api/cluster/broker-config", params={"addr": "10.9.9.9:10911"}).status_code == 404


def test_openapi_lists_every_endpoint(api: ConsoleApi) -> None:
    doc = api.get("/api/openapi.json")
    assert doc["openapi"].startswith("3.")
    for path in ("/api/consumers", "/api/topics/{topic}/reset-offset", "/api/dlq/resend", "/api/trace"):
        assert path in doc["paths"]
    create = doc["paths"]["/api/topics"]["post"]
    assert "messageType" in create["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert any(p["name"] == "X-CSRF-Token" for p in create["parameters"])


def test_login_console_needs_an_account_and_read_only_users_change_nothing(login_console) -> None:
    base = f"http://127.0.0.1:{login_console.port}"
    c = ConsoleApi(base)
    try:
        assert c.session["loginRequired"] and c.session["user"] is None
        assert c.http.get("/api/consumers").status_code == 401
        bad = c.send("POST", "/api/login", {"username": "admin", "password": "nope"})
        assert bad.status_code == 401
        nocsrf = c.http.post("/api/login", json={"username": "viewer", "password": "s3cret-viewer"})
        assert nocsrf.status_code == 403  # login itself needs the pre-login token
        ok = c.send("POST", "/api/login", {"username": "viewer", "password": "s3cret-viewer"})
        assert ok.status_code == 200 and ok.json()["role"] == "user"
        c.session["csrf"] = ok.json()["csrf"]
        assert c.http.get("/api/consumers").status_code == 200
        r = c.send("POST", "/api/consumers", {"group": unique("ro_cg"), "clusterName": "DefaultCluster"})
        assert r.status_code == 403 and "read-only" in r.json()["error"]
        c.send("POST", "/api/logout", {})
        assert c.http.get("/api/consumers").status_code == 401
    finally:
        c.close()


def test_logins_are_throttled_after_failures(login_console) -> None:
    c = ConsoleApi(f"http://127.0.0.1:{login_console.port}")
    try:
        codes = [
            c.send("POST", "/api/login", {"username": "ghost", "password": str(i)}).status_code
            for i in range(7)
        ]
        assert codes[:5] == [401] * 5 and 429 in codes[5:]
    finally:
        c.close()


def test_trace_shows_send_store_and_consume(sa: Standalone, api: ConsoleApi) -> None:
    topic = new_topic(sa.namesrv, 2, prefix="Traced")
    group = unique("traced_cg")
    got = Received()
    c = consumer(sa, group, topic, got, enable_msg_trace=True)
    try:
        with Producer(unique("traced_pg"), namesrv=sa.namesrv, enable_msg_trace=True) as p:
            r = p.send(Message(topic, b"traced", keys=["TR-1"]))
        got.wait_for(lambda ms: any(m.msg_id == r.msg_id for m in ms))

        def complete() -> dict | None:
            t = api.get("/api/trace", msgId=r.msg_id)
            kinds = {e["kind"] for e in t["events"]}
            return t if {"Pub", "SubBefore", "SubAfter"} <= kinds else None

        t = wait_until(complete, timeout=30, what="the trace's send and consume records")
    finally:
        c.shutdown()
    pub = next(e for e in t["events"] if e["kind"] == "Pub")
    assert pub["topic"] == topic and pub["success"] and "TR-1" in pub["keys"]
    after = next(e for e in t["events"] if e["kind"] == "SubAfter")
    assert after["group"] == group and after["success"]
    assert t["stored"]["topic"] == topic and t["stored"]["offsetMsgId"] == r.offset_msg_id
