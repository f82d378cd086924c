"""rocketq.metrics pieces on real data: consume queue units read by the intake (a real ConsumeQueue in a
temp dir), the config keys, the credentials check."""

from __future__ import annotations

import base64

import pytest

from rocketq.metrics.auth import CredentialsError, MetricsAuth, make_auth
from rocketq.metrics.intake import BLANK_UNIT_SIZE, SIZE_BUCKETS, IncomingTraffic, unit_sizes
from rocketq.metrics.settings import MetricsConfigError, MetricsSettings, parse_labels
from rocketq.store.consume_queue import CQ_UNIT, ConsumeQueue


def test_unit_sizes_reads_the_size_field() -> None:
    sizes = [91, 1 << 20, BLANK_UNIT_SIZE]
    units = b"".join(CQ_UNIT.pack(1000 * i, size, 77) for i, size in enumerate(sizes))
    assert list(unit_sizes(units)) == [91, 1 << 20, BLANK_UNIT_SIZE]


def test_intake_counts_units_since_the_baseline(tmp_path) -> None:
    cq = ConsumeQueue("T", 0, str(tmp_path), 20 * 64, preallocate=False)  # 64 units per file: several files
    phys = 0

    def put(sizes: list[int]) -> None:
        nonlocal phys
        for size in sizes:
            off = cq.get_max_offset_in_queue()
            assert cq.put(phys, size, 0, off)
            phys += size

    put([100] * 10)  # stored before the exporter started: not counted
    intake = IncomingTraffic()
    intake.baseline([("T", 0, cq)])
    sizes = [200] * 70 + [5000] * 20 + [600_000] * 3 + [3 * 1024 * 1024]  # crosses file boundaries
    put(sizes)
    intake.advance([("T", 0, cq, cq.get_max_offset_in_queue())], budget=50)  # a scrape with a small budget
    assert intake.topics["T"].messages == 50
    intake.advance([("T", 0, cq, cq.get_max_offset_in_queue())])
    t = intake.topics["T"]
    assert t.messages == len(sizes)
    assert t.bytes == sum(sizes)
    expected = [0] * (len(SIZE_BUCKETS) + 1)
    for size in sizes:
        expected[next((i for i, b in enumerate(SIZE_BUCKETS) if size <= b), len(SIZE_BUCKETS))] += 1
    assert t.buckets == expected
    intake.advance([("T", 0, cq, cq.get_max_offset_in_queue())])  # nothing new: nothing added
    assert t.messages == len(sizes)
    intake.advance([])  # the queue is gone: its cursor goes, the topic's totals stay until forgotten
    assert ("T", 0) not in intake.cursor
    intake.forget_topics(set())
    assert "T" not in intake.topics


def test_settings_follow_rocketmq_and_refuse_what_is_not_built() -> None:
    s = MetricsSettings.from_config({}.get)
    assert (s.exporter_type, s.host, s.port, s.enabled) == ("DISABLE", "127.0.0.1", 5557, False)
    s = MetricsSettings.from_config({"metricsExporterType": "prom", "metricsLabel": "env:prod, dc:a"}.get)
    assert s.enabled and s.labels == {"env": "prod", "dc": "a"}
    for kind in ("OTLP_GRPC", "LOG"):
        with pytest.raises(MetricsConfigError, match=kind):
            MetricsSettings.from_config({"metricsExporterType": kind}.get)
    with pytest.raises(MetricsConfigError):
        MetricsSettings.from_config({"metricsExporterType": "NONE"}.get)
    for bad in ("env", "bad-name:x", "cluster:x", "a:b:c"):
        with pytest.raises(MetricsConfigError):
            parse_labels(bad)
    with pytest.raises(MetricsConfigError):
        MetricsSettings.from_config({"metricsPromExporterPort": "70000"}.get)


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_auth_accepts_admin_accounts_and_the_token(tmp_path) -> None:
    accounts = {"admin": ("secret-1", True), "user": ("secret-2", False)}
    auth = MetricsAuth(lambda: accounts, "t" * 20)
    assert auth.allows(_basic("admin", "secret-1"))
    assert not auth.allows(_basic("admin", "secret-x"))
    assert not auth.allows(_basic("user", "secret-2"))  # not an admin
    assert not auth.allows(_basic("ghost", "secret-1"))
    assert auth.allows("Bearer " + "t" * 20) and not auth.allows("Bearer " + "u" * 20)
    no_colon = "Basic " + base64.b64encode(b"nocolon").decode()
    for junk in (None, "", "Basic", "Basic !!!", no_colon, "Digest x"):
        assert not auth.allows(junk)
    assert make_auth("", None) is None  # no ACL, no token: open (and on 127.0.0.1 by default)
    (tmp_path / "short").write_text("abc")
    with pytest.raises(CredentialsError):
        make_auth(str(tmp_path / "short"), None)
    with pytest.raises(CredentialsError):
        make_auth(str(tmp_path / "missing"), None)
