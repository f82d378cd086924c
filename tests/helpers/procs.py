"""Start rocketq processes for tests: a free 127.0.0.1 port, wait for the boot line, SIGTERM on stop.

    proc = start_rocketq(["namesrv", "-p", "{port}", "--home", str(tmp)], boot_line=NAMESRV_BOOT_LINE)
    ... proc.addr ...
    proc.stop()          # SIGTERM, wait, SIGKILL if it hangs; returns the exit code

"{port}" in args is replaced by the chosen port (pass port=... to pick it yourself). Output (stdout and
stderr, merged) is collected in ``proc.lines`` and shown when the boot line never comes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

NAMESRV_BOOT_LINE = "The Name Server boot success. serializeType=JSON"

# Small store files for test brokers: the defaults (1 GiB CommitLog segments with the next one
# preallocated, a ~420 MB preallocated IndexFile) add up to many GiB over a suite on a shared disk,
# and a disk past 90 % makes every broker refuse writes.
SMALL_STORE_CONF = {
    "mapedFileSizeCommitLog": str(64 * 1024 * 1024),
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
    # the disk is shared with other machines' work: its fill level is not this suite's to react to
    # (the disk guards themselves are tested in tests/unit/store with an injected usage and a tmpfs)
    "diskMaxUsedSpaceRatio": "99",
    "diskSpaceCleanForciblyRatio": "99",
    "diskSpaceWarningLevelRatio": "99",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RocketqProcess:
    def __init__(self, proc: subprocess.Popen[str], port: int, args: list[str]) -> None:
        self.proc = proc
        self.port = port
        self.args = args
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 20.0) -> str:
        """Block until a line containing ``text`` is printed; raises if the process exits or times out."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if text in line:
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"no line {text!r} within {timeout}s from {self.args}:\n{self._tail()}"
                    )
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise RuntimeError(
                        f"{self.args} exited ({self.proc.returncode}) before {text!r}:\n{self._tail()}"
                    )
                self._cond.wait(min(left, 0.2))

    def _tail(self) -> str:
        return "\n".join(self.lines[-200:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send_signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 15.0, sig: int = signal.SIGTERM) -> int:
        """Ask the process to exit (SIGTERM); SIGKILL it if it does not within ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(2)
        return self.proc.returncode

    def kill(self) -> int:
        """SIGKILL (crash simulation)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        self._reader.join(2)
        return self.proc.returncode


def start_rocketq(
    args: Sequence[str],
    *,
    boot_line: str,
    port: int | None = None,
    timeout: float = 30.0,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    attempts: int = 3,
) -> RocketqProcess:
    """Run ``python -m rocketq.cli *args`` and wait for ``boot_line``. Retries on a port race."""
    last: Exception | None = None
    for _ in range(attempts):
        chosen = port if port is not None else free_port()
        argv = [a.replace("{port}", str(chosen)) for a in args]
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        proc = subprocess.Popen(
            [sys.executable, "-m", "rocketq.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=full_env,
            cwd=cwd,
        )
        rp = RocketqProcess(proc, chosen, argv)
        try:
            rp.wait_for_line(boot_line, timeout)
            return rp
        except (RuntimeError, TimeoutError) as exc:
            rp.kill()
            last = exc
            if port is not None or "in use" not in rp.output:
                raise
    assert last is not None
    raise last


def start_namesrv(
    home: str | os.PathLike[str],
    *,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> RocketqProcess:
    Path(home).mkdir(parents=True, exist_ok=True)
    return start_rocketq(
        ["namesrv", "-p", "{port}", "--home", str(home), *extra_args],
        boot_line=NAMESRV_BOOT_LINE,
        port=port,
        env=env,
    )


def start_namesrv_with_conf(home: str | os.PathLike[str], props: dict[str, str]) -> RocketqProcess:
    """A NameServer whose namesrv.conf (written into ``home``) holds ``props``."""
    Path(home).mkdir(parents=True, exist_ok=True)
    conf = Path(home) / "namesrv.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return start_namesrv(home, extra_args=["-c", str(conf)])
