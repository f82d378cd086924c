"""The console against a real `rocketq standalone` (one for every console test module: package scope) with
real traffic from the rocketq client; a second console process (`rocketq console`) that requires a login."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from rocketq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer
from rocketq.admin import MQAdminExt
from tests.helpers.procs import RocketqProcess, start_rocketq
from tests.interop import standalone as _sa
from tests.interop.standalone import FAST_DELAY_LEVELS, Standalone, start_standalone, unique

CHROMIUM = "/usr/bin/chromium"
USERS = "# console accounts\nadmin=s3cret-admin,1\nviewer=s3cret-viewer\n"


def off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """Run fn in a thread of its own: Playwright's sync API keeps an event loop running in the test's
    thread, where the in-process mqadmin (asyncio.run) cannot start another."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def new_topic(namesrv: str, queues: int = 4, prefix: str = "T") -> str:
    return off_loop(_sa.new_topic, namesrv, queues, prefix)


def mqadmin_ok(namesrv: str, *args: str) -> str:
    return off_loop(_sa.mqadmin_ok, namesrv, *args)


@pytest.fixture(scope="package")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    # fast delay levels: a failed message reaches its DLQ in about a second
    s = start_standalone(
        tmp_path_factory.mktemp("console"), {"messageDelayLevel": FAST_DELAY_LEVELS}, console=True
    )
    yield s
    s.stop()


@pytest.fixture(scope="package")
def login_console(sa: Standalone, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketqProcess]:
    """`rocketq console` for the same cluster, with a users file: every page needs a login."""
    home = tmp_path_factory.mktemp("console-login")
    users = home / "users.properties"
    users.write_text(USERS)
    proc = start_rocketq(
        ["console", "-n", sa.namesrv, "--port", "{port}", "--users-file", str(users), "--home", str(home)],
        boot_line="The console boot success",
    )
    yield proc
    proc.stop()


@pytest.fixture(scope="package")
def producer(sa: Standalone) -> Iterator[Producer]:
    p = Producer(unique("console_pg"), namesrv=sa.namesrv)
    p.start()
    yield p
    p.shutdown()


class ConsoleApi:
    """An HTTP client of the console as its pages use it: a session cookie and the CSRF header."""

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=30.0)
        self.session = self.http.get("/api/session").json()

    @property
    def csrf(self) -> str:
        return self.session["csrf"]

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params={k: v for k, v in params.items() if v is not None})
        assert r.status_code == 200, f"GET {path}: {r.status_code} {r.text}"
        return r.json()

    def send(self, method: str, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        headers = {"X-CSRF-Token": self.csrf}
        return self.http.request(method, path, json=body, headers=headers, **kw)

    def post(self, path: str, body: Any) -> Any:
        r = self.send("POST", path, body)
        assert r.status_code == 200, f"POST {path}: {r.status_code} {r.text}"
        return r.json()

    def wait_job(self, job_id: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            j = self.get(f"/api/jobs/{job_id}")
            if j["state"] != "running":
                return j
            assert time.monotonic() < deadline, f"job {job_id} still running: {j}"
            time.sleep(0.1)

    def close(self) -> None:
        self.http.close()


@pytest.fixture(scope="package")
def api(sa: Standalone) -> Iterator[ConsoleApi]:
    c = ConsoleApi(sa.console)
    yield c
    c.close()


class Received:
    """A push consumer's listener: records bodies; fails (RECONSUME_LATER) those ``fail`` says to."""

    def __init__(self, fail: Callable[[Any], bool] = lambda m: False) -> None:
        self.fail = fail
        self.msgs: list[Any] = []
        self.cond = threading.Condition()

    def __call__(self, msgs: list[Any]) -> ConsumeResult:
        with self.cond:
            if any(self.fail(m) for m in msgs):
                return ConsumeResult.RECONSUME_LATER
            self.msgs.extend(msgs)
            self.cond.notify_all()
        return ConsumeResult.SUCCESS

    def wait_for(self, pred: Callable[[list[Any]], bool], timeout: float = 30.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.msgs):
                left = deadline - time.monotonic()
                assert left > 0, f"not received in {timeout}s; got {[m.body for m in self.msgs][:20]}"
                self.cond.wait(min(left, 0.2))
            return list(self.msgs)


def consumer(sa: Standalone, group: str, topic: str, listener: Received, **kw: Any) -> PushConsumer:
    c = PushConsumer(
        group, namesrv=sa.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kw
    )
    c.subscribe(topic, "*")
    c.register_listener(listener)
    c.start()
    return c


def wait_until(pred: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, f"{what} not reached within {timeout}s"
        time.sleep(0.2)


def lagging_group(sa: Standalone, producer: Producer, queues: int = 4) -> tuple[str, str, int]:
    """Real traffic with a known lag: 24 messages consumed (and committed) by a push consumer that then
    stops, then 13 more sent. Returns (topic, group, 13)."""
    topic = new_topic(sa.namesrv, queues, prefix="Lag")
    group = unique("lag_cg")
    for i in range(24):
        producer.send(Message(topic, f"before-{i}".encode(), keys=[f"K{i}"]))
    got = Received()
    c = consumer(sa, group, topic, got)
    try:
        got.wait_for(lambda ms: len(ms) >= 24)
        # the client commits its offsets every few seconds: wait for all 24 on the broker before it stops
        with MQAdminExt(sa.namesrv) as admin:

            def committed() -> int:
                return sum(r.consumer_offset for r in admin.group_progress(group, topic).rows)

            wait_until(lambda: committed() == 24, timeout=30, what="24 committed offsets")
    finally:
        c.shutdown()
    for i in range(13):
        producer.send(Message(topic, f"after-{i}".encode()))
    return topic, group, 13


def chromium_or_skip() -> str:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    raise AssertionError  # unreachable
