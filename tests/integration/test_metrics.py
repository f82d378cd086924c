"""metricsExporterType=PROM: /metrics of a real standalone after known traffic has the exact counts.

N messages of known sizes go in through the Python client; a consumer group that holds every message it
gets shows the lag and in-flight counts, then consumes them; the counters, the size histogram, the lag
gauges and the connection gauges must say exactly that.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from tests.helpers.procs import free_port, start_namesrv_with_conf
from tests.helpers.scrape import Scrape, get, scrape
from tests.interop.standalone import Standalone, mqadmin_ok, start_standalone

from rocketq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer
from rocketq.client.instance import ClientConfig
from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

FAST = ClientConfig(rebalance_interval=2.0, persist_consumer_offset_interval=0.5)
SMALL, LARGE = 100, 5000  # bytes of body: under 1 KiB, and between 4 KiB and 512 KiB with the header
N_SMALL, N_LARGE = 15, 5
N = N_SMALL + N_LARGE


class Metrics(Standalone):
    url: str


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    port = free_port()
    s = start_standalone(
        tmp_path_factory.mktemp("metrics"),
        {
            "metricsExporterType": "PROM",
            "metricsPromExporterPort": str(port),
            "metricsLabel": "env:test",
            "enableRemotingMetrics": "true",
        },
    )
    s.url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
    yield s
    s.stop()


def wait_for(url: str, cond: Callable[[Scrape], bool], what: str, timeout: float = 30.0) -> Scrape:
    deadline = time.monotonic() + timeout
    while True:
        m = scrape(url)
        if cond(m):
            return m
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last scrape:\n{m.text[:4000]}")
        time.sleep(0.2)


def test_exact_counts_after_known_traffic(sa: Standalone) -> None:
    url = sa.url  # type: ignore[attr-defined]
    topic = f"MT_{uuid.uuid4().hex[:8]}"
    group = f"MG_{uuid.uuid4().hex[:8]}"
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    before = scrape(url)
    assert before.value("rocketmq_messages_in_total", topic=topic) == 0
    assert before.value("rocketmq_topic_number") >= 1
    common = {"cluster": "DefaultCluster", "node_type": "broker", "env": "test"}
    assert before.find("rocketmq_topic_number", **common), before.text[:500]

    # random bytes: the client compresses bodies over 4 KiB, and these must stay large
    bodies = [b"s" * SMALL] * N_SMALL + [os.urandom(LARGE) for _ in range(N_LARGE)]
    with Producer(f"PG_{uuid.uuid4().hex[:8]}", namesrv=sa.namesrv) as producer:
        for body in bodies:
            producer.send(Message(topic, body, tags="TagA"))
        m = scrape(url)
        # the producer is connected now: one connection, RocketMQ's labels
        conns = m.find("rocketmq_producer_connections", protocol_type="remoting", language="java")
        assert sum(v for _, v in conns) >= 1, m.text

    labels = {"topic": topic, "message_type": "normal", "is_system": "false"}
    assert m.value("rocketmq_messages_in_total", **labels) == N
    assert m.value("rocketmq_message_size_count", **labels) == N
    assert m.value("rocketmq_message_size_bucket", le="1024.0", **labels) == N_SMALL
    assert m.value("rocketmq_message_size_bucket", le="4096.0", **labels) == N_SMALL
    assert m.value("rocketmq_message_size_bucket", le="524288.0", **labels) == N
    assert m.value("rocketmq_message_size_bucket", le="+Inf", **labels) == N
    bytes_in = m.value("rocketmq_throughput_in_total", **labels)
    assert bytes_in == m.value("rocketmq_message_size_sum", **labels)
    assert bytes_in > N_SMALL * SMALL + N_LARGE * LARGE  # records: body plus header and properties

    # a group that holds every message it receives until released: all 20 pulled, none consumed
    release = threading.Event()
    got: list = []
    lock = threading.Lock()

    def hold(msgs: list) -> ConsumeResult:
        release.wait(60)
        with lock:
            got.extend(msgs)
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        group,
        namesrv=sa.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        client_config=FAST,
        consume_thread_min=N,
        consume_thread_max=N,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(hold)
    consumer.start()
    try:
        lag = {"consumer_group": group, "topic": topic, "is_retry": "false", "is_system": "false"}
        m = wait_for(
            url,
            lambda m: (
                m.value("rocketmq_consumer_lag_messages", **lag) == N
                and m.value("rocketmq_consumer_inflight_messages", **lag) == N
            ),
            "lag and in-flight of the held group",
        )
        assert m.value("rocketmq_consumer_ready_messages", **lag) == 0
        assert m.value("rocketmq_consumer_lag_latency", **lag) > 0
        assert m.value("rocketmq_messages_out_total", consumer_group=group, topic=topic) == N
        conns = m.find("rocketmq_consumer_connections", consumer_group=group, consume_mode="push")
        assert [v for _, v in conns] == [1], m.text

        release.set()
        m = wait_for(
            url,
            lambda m: (
                m.value("rocketmq_consumer_lag_messages", **lag) == 0
                and m.value("rocketmq_consumer_inflight_messages", **lag) == 0
            ),
            "the group to catch up",
        )
        assert m.value("rocketmq_consumer_lag_latency", **lag) == 0
        with lock:
            assert len(got) == N
            stored = sum(msg.store_size for msg in got)
        out = {"consumer_group": group, "topic": topic, "is_retry": "false", "is_system": "false"}
        assert m.value("rocketmq_messages_out_total", **out) == N
        assert m.value("rocketmq_throughput_out_total", **out) == stored
        assert m.value("rocketmq_throughput_in_total", **labels) == stored  # the same records went in
    finally:
        release.set()
        consumer.shutdown()
    assert m.value("rocketmq_consumer_group_number") >= 1
    for name in ("rocketmq_storage_size", "rocketmq_storage_flush_behind_bytes"):
        assert m.find(name, storage_type="local", storage_medium="disk"), name
    assert m.find("rocketmq_rpc_latency_count", request_code="send_message_v2", response_code="success")


def test_endpoint_answers_only_get_metrics(sa: Standalone) -> None:
    url = sa.url  # type: ignore[attr-defined]
    base = url.rsplit("/", 1)[0]
    status, headers, _ = get(base + "/other")
    assert status == 404
    status, headers, body = get(url)
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert "rocketmq_topic_number" in body


def test_namesrv_metrics(tmp_path) -> None:
    port = free_port()
    ns = start_namesrv_with_conf(
        tmp_path,
        {
            "metricsExporterType": "PROM",
            "metricsPromExporterPort": str(port),
            "enableRemotingMetrics": "true",
        },
    )
    try:

        async def ask() -> None:
            async with RemotingClient() as c:
                for _ in range(3):
                    req = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
                    await c.invoke(ns.addr, req, 5.0)

        asyncio.run(ask())
        m = scrape(f"http://127.0.0.1:{port}/metrics")
        common = {"node_type": "namesrv", "node_id": ns.addr}
        assert m.value("rocketq_namesrv_live_brokers", **common) == 0
        rpc = {"request_code": "get_all_topic_list_from_nameserver", "protocol_type": "remoting", **common}
        assert m.value("rocketmq_rpc_latency_count", **rpc) == 3
        assert m.value("rocketmq_rpc_latency_bucket", le="+Inf", **rpc) == 3
    finally:
        ns.stop()


# -- the shipped Grafana dashboard and alert rules ----------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "conf" / "grafana" / "rocketq-dashboard.json"
ALERTS = ROOT / "conf" / "prometheus" / "rocketq-alerts.yml"
ALERT_TESTS = ROOT / "tests" / "prometheus" / "rocketq-alerts.test.yml"
METRIC_NAME = re.compile(r"\b(rocket(?:mq|q)_[a-z0-9_]+)")


def exported_names(m: Scrape) -> set[str]:
    names = set()
    for name, kind in m.types.items():
        names.add(name)
        if kind == "counter":
            names.add(name + "_total")
        if kind == "histogram":
            names.update(name + s for s in ("_bucket", "_sum", "_count"))
    return names


def alert_rules() -> list[dict]:
    doc = yaml.safe_load(ALERTS.read_text())
    assert isinstance(doc, dict) and isinstance(doc.get("groups"), list) and doc["groups"]
    rules = []
    for group in doc["groups"]:
        assert set(group) == {"name", "rules"} and group["rules"], group
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["alert"] and rule["expr"].strip(), rule
            assert rule["labels"]["severity"] in ("warning", "critical"), rule
            assert "for" not in rule or re.fullmatch(r"\d+[smh]", rule["for"]), rule
            assert {"summary", "description"} <= set(rule["annotations"]), rule
            rules.append(rule)
    return rules


def test_dashboard_and_alerts_use_exported_metrics(sa: Standalone) -> None:
    """Every rocketmq_/rocketq_ name the dashboard and the alert rules query is one the broker exports."""
    names = exported_names(scrape(sa.url))  # type: ignore[attr-defined]
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 20
    exprs += [r["expr"] for r in alert_rules()]
    used = {n for e in exprs for n in METRIC_NAME.findall(e)}
    assert used - names == set(), f"not exported: {sorted(used - names)}"
    assert {p["gridPos"]["y"] for p in dashboard["panels"]}  # panels are laid out
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["DS_PROMETHEUS", "cluster", "broker"]


def promtool() -> str | None:
    found = shutil.which("promtool") or str(ROOT / ".cache" / "bin" / "promtool")
    return found if os.access(found, os.X_OK) else None


@pytest.mark.skipif(promtool() is None, reason="promtool not installed (scripts/install_promtool.sh)")
def test_alert_rules_pass_promtool() -> None:
    tool = promtool()
    assert tool is not None
    for args in (["check", "rules", str(ALERTS)], ["test", "rules", str(ALERT_TESTS)]):
        out = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr


def test_client_metrics_opt_in(sa: Standalone) -> None:
    """rocketq.client.metrics.enable(): the producer and push consumer record the 5.x client series."""
    from prometheus_client import CollectorRegistry, generate_latest

    from rocketq.client import metrics as client_metrics

    registry = CollectorRegistry()
    client_metrics.enable(registry)
    topic = f"CM_{uuid.uuid4().hex[:8]}"
    group = f"CMG_{uuid.uuid4().hex[:8]}"
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    n = 10
    done = threading.Event()
    got: list = []

    def listener(msgs: list) -> ConsumeResult:
        got.extend(msgs)
        if len(got) >= n:
            done.set()
        return ConsumeResult.SUCCESS

    try:
        with Producer(f"CMP_{uuid.uuid4().hex[:8]}", namesrv=sa.namesrv) as producer:
            for i in range(n):
                producer.send(Message(topic, f"m{i}".encode()))
        consumer = PushConsumer(
            group, namesrv=sa.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            client_config=FAST,
        )  # fmt: skip
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        consumer.start()
        try:
            assert done.wait(30), f"consumed {len(got)} of {n}"
            deadline = time.monotonic() + 30
            while True:  # a listener's time is recorded once it has returned
                m = Scrape(generate_latest(registry).decode())
                count = m.value("rocketmq_process_time_count", topic=topic, consumer_group=group)
                if count >= n or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert m.find("rocketmq_consumer_cached_messages", topic=topic, consumer_group=group)
        finally:
            consumer.shutdown()
    finally:
        client_metrics.disable()
    assert m.value("rocketmq_send_cost_time_count", topic=topic, invocation_status="success") == n
    consumed = {"topic": topic, "consumer_group": group}
    assert m.value("rocketmq_delivery_latency_count", **consumed) == n
    assert m.value("rocketmq_await_time_count", **consumed) == n
    assert m.value("rocketmq_process_time_count", invocation_status="success", **consumed) == n


def test_long_admin_operations_show_progress(sa: Standalone, monkeypatch, capsys) -> None:
    """updateTopic over a cluster's brokers and topicList -c over every topic report progress on stderr (a
    terminal, or ROCKETQ_PROGRESS=1); stdout keeps mqadmin's output."""
    monkeypatch.setenv("ROCKETQ_PROGRESS", "1")
    topic = f"PR_{uuid.uuid4().hex[:8]}"
    out = mqadmin_ok(sa.namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "3", "-w", "3")
    assert "create topic to" in out and "creating topic" not in out
    assert f"creating topic {topic}: 1/1 brokers" in capsys.readouterr().err
    out = mqadmin_ok(sa.namesrv, "topicList", "-c")
    assert topic in out
    err = capsys.readouterr().err
    shown = re.findall(r"reading topic routes and consumer groups: (\d+)/(\d+) topics", err)
    assert shown and shown[-1][0] == shown[-1][1] and int(shown[-1][1]) >= 1, err
    monkeypatch.delenv("ROCKETQ_PROGRESS")  # not a terminal: nothing on stderr
    mqadmin_ok(sa.namesrv, "topicList", "-c")
    assert capsys.readouterr().err == ""
