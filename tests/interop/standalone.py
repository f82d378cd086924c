"""Helpers for the interop and admin tests: a real `rocketq standalone`, mqadmin runs, node runs."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.procs import SMALL_STORE_CONF, RocketqProcess, free_port, start_rocketq

BROKER_BOOT_MARK = "The broker["
NODE_DIR = Path(__file__).parent / "node"
# Short delay levels so the retry path (level 3 + reconsumeTimes) redelivers within a second or two.
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)


@dataclass
class Standalone:
    proc: RocketqProcess
    namesrv: str
    broker: str
    home: Path
    console_port: int | None = None

    @property
    def console(self) -> str:
        assert self.console_port is not None, "started without a console (pass console=True)"
        return f"http://127.0.0.1:{self.console_port}"

    def stop(self) -> int:
        return self.proc.stop()


def start_standalone(
    home: Path,
    conf: dict[str, str] | None = None,
    *,
    console: bool = False,
    console_args: tuple[str, ...] = (),
) -> Standalone:
    """A standalone on free ports; its web console only when ``console`` (on a free port too), else none:
    several suites run on one machine at once, and the console's default port 8080 is one for all."""
    home.mkdir(parents=True, exist_ok=True)
    args = ["standalone", "--home", str(home), "--namesrv-port", "{port}"]
    broker_port = free_port()
    args += ["--broker-port", str(broker_port)]
    console_port = free_port() if console else None
    args += ["--console-port", str(console_port), *console_args] if console else ["--no-console"]
    conf = {**SMALL_STORE_CONF, **(conf or {})}
    path = home / "broker.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    args += ["-c", str(path)]
    proc = start_rocketq(args, boot_line=BROKER_BOOT_MARK, timeout=60.0)
    sa = Standalone(proc, proc.addr, f"127.0.0.1:{broker_port}", home, console_port)
    if console:
        proc.wait_for_line("The console boot success", 30.0)
    return sa


def standalone_fixture(name: str) -> Any:
    """A module-scoped ``sa`` fixture: one standalone (NameServer + broker) for the whole test file."""

    @pytest.fixture(scope="module", name="sa")
    def _sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
        s = start_standalone(tmp_path_factory.mktemp(name))
        yield s
        s.stop()

    return _sa


def admin_fixture() -> Any:
    """A module-scoped ``admin`` fixture: an MQAdminExt on the ``sa`` standalone."""

    @pytest.fixture(scope="module", name="admin")
    def _admin(sa: Standalone) -> Iterator[Any]:
        from rocketq.admin import MQAdminExt

        with MQAdminExt(sa.namesrv) as a:
            yield a

    return _admin


def mqadmin(namesrv: str, *args: str) -> tuple[int, str]:
    """Run an mqadmin command in-process; returns (exit code, stdout)."""
    from rocketq.admin.main import main

    out = io.StringIO()
    code = main([args[0], "-n", namesrv, *args[1:]], out=out)
    return code, out.getvalue()


def mqadmin_ok(namesrv: str, *args: str) -> str:
    code, text = mqadmin(namesrv, *args)
    assert code == 0, f"mqadmin {' '.join(args)} exited {code}:\n{text}"
    return text


def new_topic(namesrv: str, queues: int = 4, prefix: str = "T") -> str:
    """A fresh topic on DefaultCluster (mqadmin updateTopic), ``queues`` read and write queues."""
    topic = f"{prefix}_{uuid.uuid4().hex[:10]}"
    mqadmin_ok(
        namesrv, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", str(queues), "-w", str(queues)
    )
    return topic


def rows(text: str) -> list[dict[str, str]]:
    """Parse mqadmin's aligned table: the '#' header gives each column's start; ends at a blank line."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("#"))
    header = lines[start]
    starts = [m.start() for m in re.finditer(r"#", header)]
    names = [header[a:b].strip().lstrip("#") for a, b in zip(starts, [*starts[1:], None], strict=True)]
    out = []
    for ln in lines[start + 1 :]:
        if not ln.strip() or ln.startswith("#"):
            break
        cells = [
            ln[a:b].strip() if b else ln[a:].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)
        ]
        out.append(dict(zip(names, cells, strict=True)))
    return out


def node_available() -> str | None:
    """None when node + npm + the installed packages are there, else the reason to skip."""
    if shutil.which("node") is None:
        return "node is not installed"
    if shutil.which("npm") is None:
        return "npm is not installed"
    return None


def ensure_node_modules() -> None:
    """`npm install` in tests/interop/node when ali-ons is missing (scripts/test.sh normally did it)."""
    if (NODE_DIR / "node_modules" / "ali-ons" / "package.json").exists():
        return
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=NODE_DIR,
        check=True,
        timeout=300,
    )


class NodeRun:
    """A node script in the background; its JSON-line events collected as they arrive."""

    def __init__(self, script: str, config: dict[str, Any]) -> None:
        self.script = script
        self.proc = subprocess.Popen(
            ["node", str(NODE_DIR / script), json.dumps(config)],
            cwd=NODE_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._cond = threading.Condition()
        self._threads = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "stdout", "line": line}
            with self._cond:
                self.events.append(ev)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self.stderr.append(line.rstrip())

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e.get("event") == kind]

    def wait_for(self, kind: str, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [e for e in self.events if e.get("event") == kind]
                if len(got) >= count:
                    return got
                fatal = [e for e in self.events if e.get("event") == "fatal"]
                if fatal or (self.proc.poll() is not None and not self._threads[0].is_alive()):
                    raise AssertionError(
                        f"{self.script} ended before {count} {kind!r} events:\n{self.report()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.script}: only {len(got)}/{count} {kind!r} events:\n{self.report()}"
                    )
                self._cond.wait(min(left, 0.2))

    def wait(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.script} did not finish within {timeout}s:\n{self.report()}"
            ) from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def report(self) -> str:
        ev = "\n".join(json.dumps(e)[:300] for e in self.events[-40:])
        err = "\n".join(self.stderr[-40:])
        return f"events:\n{ev}\nstderr:\n{err}"


def run_node(script: str, config: dict[str, Any], timeout: float = 60.0) -> NodeRun:
    run = NodeRun(script, config)
    code = run.wait(timeout)
    assert code == 0, f"{script} exited {code}:\n{run.report()}"
    return run


def unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{int(time.time() * 1000) % 10_000_000}"
