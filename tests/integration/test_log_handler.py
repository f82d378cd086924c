"""rocketq.logging.RocketMQHandler: records reach a real broker and a consumer reads them; with no broker
at all the application is neither blocked nor made to hold an unbounded queue."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from tests.helpers.procs import free_port
from tests.interop.standalone import mqadmin_ok, start_standalone

from rocketq import ConsumeFromWhere, ConsumeResult, PushConsumer
from rocketq.client.instance import ClientConfig
from rocketq.logging import RocketMQHandler

SRC = Path(__file__).resolve().parents[2] / "src" / "rocketq"


def run_in_thread(fn, timeout: float = 60.0):
    """fn() on a thread; fails the test if it has not returned by the deadline (it blocked)."""
    out: dict[str, object] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"{fn} still running after {timeout}s: it blocked"
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out.get("value")


def test_dead_broker_neither_blocks_nor_grows() -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    handler = RocketMQHandler(
        "LogTopic", namesrv=dead, tags="t", max_queued=100, max_queued_bytes=64 * 1024, close_timeout=2.0
    )
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.DEBUG)  # the client's own DEBUG lines must not feed the handler
    root.addHandler(handler)
    app = logging.getLogger("app.dead")
    n = 5_000
    try:

        def log_many() -> None:
            for i in range(n):
                app.info("record %d %s", i, "x" * 100)

        run_in_thread(log_many)
        assert handler.queued <= 100
        assert handler._queued_bytes <= 64 * 1024
        # every record is queued, being tried, or counted as dropped; nothing was sent
        assert handler.sent == 0
        assert handler.dropped >= n - 100 - handler.batch_size
        assert handler.dropped + handler.queued + handler._inflight == n
        bodies = [b.decode() for b, _ in list(handler._queue)]
        assert all(body.startswith("record ") for body in bodies), bodies[:3]
        run_in_thread(handler.flush)  # the broker is not answering: flush does not wait
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        run_in_thread(handler.close)  # gives up after close_timeout
    assert handler.queued == 0
    assert handler.sent == 0 and handler.dropped == n
    assert handler.failed_sends >= 1 and handler.last_error
    handler.emit(logging.LogRecord("app", logging.INFO, __file__, 1, "after close", None, None))
    assert handler.dropped == n + 1  # closed: counted, never raised


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory):
    s = start_standalone(tmp_path_factory.mktemp("loghandler"))
    yield s
    s.stop()


def test_records_reach_a_consumer(sa) -> None:
    topic = f"LOG_{uuid.uuid4().hex[:8]}"
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    handler = RocketMQHandler(
        topic, namesrv=sa.namesrv, tags="app-a", keys=lambda r: f"{r.name}:{r.lineno}", batch_size=16
    )
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    log = logging.getLogger(f"app.{uuid.uuid4().hex[:6]}")
    log.propagate = False
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    n = 50
    for i in range(n):
        log.info("line %d", i)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    log.removeHandler(handler)
    run_in_thread(handler.close)
    assert handler.sent == n + 1 and handler.dropped == 0, (handler.sent, handler.dropped, handler.last_error)

    got: list = []
    lock = threading.Lock()

    def listener(msgs: list) -> ConsumeResult:
        with lock:
            got.extend(msgs)
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        f"LG_{uuid.uuid4().hex[:8]}",
        namesrv=sa.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        client_config=ClientConfig(rebalance_interval=2.0),
    )
    consumer.subscribe(topic, "app-a")
    consumer.register_listener(listener)
    consumer.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(got) >= n + 1:
                    break
            time.sleep(0.1)
    finally:
        consumer.shutdown()
    with lock:
        bodies = sorted(m.body.decode() for m in got)
        assert len(got) == n + 1
        assert all(m.tags == "app-a" for m in got)
        assert all(m.keys and m.keys[0].startswith(f"{log.name}:") for m in got)
    expected = sorted([f"INFO {log.name} line {i}" for i in range(n)])
    assert [b for b in bodies if b.startswith("INFO")] == expected
    failed = [b for b in bodies if b.startswith("ERROR")]
    assert len(failed) == 1 and "ValueError: boom" in failed[0] and "Traceback" in failed[0]


def test_rocketq_logging_does_not_shadow_the_stdlib() -> None:
    code = (
        "import logging, logging.handlers, rocketq.logging, rocketq.client.producer\n"
        "import sys\n"
        "assert sys.modules['logging'].__file__.endswith('/logging/__init__.py'), sys.modules['logging']\n"
        "assert rocketq.logging.logging is sys.modules['logging']\n"
        "assert issubclass(rocketq.logging.RocketMQHandler, logging.Handler)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    # inside the package the stdlib is always imported absolutely
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        assert "from . import logging" not in text and "from .. import logging" not in text, path
