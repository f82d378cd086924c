"""The metrics endpoint with aclEnable=true: HTTP basic auth with an ACL admin account or the bearer token
from metricsPromExporterTokenFile; and its bounds (header size, request deadline, connection count)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from tests.helpers.procs import free_port
from tests.helpers.scrape import get, scrape
from tests.interop.standalone import Standalone, start_standalone

ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: true
  - accessKey: user
    secretKey: "87654321"
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
TOKEN = "s3cret-token-for-prometheus-0123456789"


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    home = tmp_path_factory.mktemp("metrics-acl")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(ACL_YML)
    (home / "token").write_text(TOKEN + "\n")
    port = free_port()
    s = start_standalone(
        home,
        {
            "aclEnable": "true",
            "metricsExporterType": "PROM",
            "metricsPromExporterPort": str(port),
            "metricsPromExporterTokenFile": str(home / "token"),
            "metricsPromExporterMaxConnections": "3",
            "metricsPromExporterRequestTimeoutSeconds": "1",
        },
    )
    s.url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
    s.port = port  # type: ignore[attr-defined]
    yield s
    s.stop()


def test_metrics_need_an_admin_account_or_the_token(sa: Standalone) -> None:
    url = sa.url  # type: ignore[attr-defined]
    status, headers, body = get(url)
    assert status == 401 and headers.get("WWW-Authenticate", "").startswith("Basic")
    assert "rocketmq_" not in body
    for user, password in (("user", "87654321"), ("RocketMQ", "wrong-secret"), ("nobody", "12345678")):
        status, _, body = get(url, user=user, password=password)
        assert status == 401 and "rocketmq_" not in body, user
    assert get(url, token="not-" + TOKEN)[0] == 401
    m = scrape(url, user="RocketMQ", password="12345678")
    assert m.value("rocketmq_topic_number") > 0
    m = scrape(url, token=TOKEN)
    assert m.value("rocketmq_topic_number") > 0
    # the token file is not among the broker's listed settings' values: only its path is
    assert TOKEN not in m.text


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            data = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def test_oversized_request_head_is_refused(sa: Standalone) -> None:
    with _connect(sa.port) as s:  # type: ignore[attr-defined]
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20_000 + b"\r\n\r\n")
        answer = _read_all(s)
    assert answer.startswith(b"HTTP/1.1 431") or answer.startswith(b"HTTP/1.1 400"), answer[:80]


def test_a_request_that_never_completes_is_closed(sa: Standalone) -> None:
    with _connect(sa.port) as s:  # type: ignore[attr-defined]
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # the blank line never comes
        t0 = time.monotonic()
        answer = _read_all(s)  # returns when the server closes
        waited = time.monotonic() - t0
    assert answer == b"" and waited < 10  # closed at the 1 s request deadline, not at our 10 s timeout


def test_connections_beyond_the_limit_get_503(sa: Standalone) -> None:
    port = sa.port  # type: ignore[attr-defined]
    held = [_connect(port) for _ in range(3)]  # the limit: idle, each holds a slot until its deadline
    try:
        time.sleep(0.2)
        with _connect(port) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = _read_all(s)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:80]
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 10
    while True:  # the slots come back once the idle ones are gone
        status = get(sa.url, token=TOKEN)[0]  # type: ignore[attr-defined]
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200
