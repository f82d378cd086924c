"""`rocketq cluster --mode 2m-noslave|2m-2s-async|2m-2s-sync --home DIR`: every process of one of the seed's
deployment modes (集群搭建) on this machine, for trying replication and failover.

A NameServer and the brokers of conf/<mode>/ as separate processes on 127.0.0.1, each broker.conf being the
shipped one plus what one machine needs (distinct ports and store directories). Masters start first, so
their slaves find them at their first registration. Logs go to DIR/logs/<name>.log; the table printed at
start names every process with its pid, so a master can be killed (kill -9 PID) to watch the slave take over
reads. Ctrl-C / SIGTERM stops them all. `controller` (5.x automatic failover) is not supported yet.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

MODES = {
    "2m-noslave": ["broker-a", "broker-b"],
    "2m-2s-async": ["broker-a", "broker-b", "broker-a-s", "broker-b-s"],
    "2m-2s-sync": ["broker-a", "broker-b", "broker-a-s", "broker-b-s"],
}
NAMESRV_BOOT = "The Name Server boot success"
BROKER_BOOT = "boot success"
# store files sized for a laptop (--small-store): 64 MiB CommitLog segments, small index files
SMALL_STORE = {"mapedFileSizeCommitLog": str(64 << 20), "maxHashSlotNum": "500000", "maxIndexNum": "2000000"}


@dataclass
class Proc:
    name: str
    role: str
    port: int
    ha_port: int
    conf: Path | None
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    reported: bool = False


def conf_text(mode: str, broker: str) -> str:
    return (
        resources.files("rocketq").joinpath("conf", mode, f"{broker}.properties").read_text(encoding="utf-8")
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _role_of(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("brokerRole="):
            return line.split("=", 1)[1].strip()
    return "ASYNC_MASTER"


def plan(mode: str, home: Path, ns_port: int, base_port: int, small: bool) -> tuple[Proc, list[Proc]]:
    """The NameServer and the brokers (masters first), their broker.conf files written under home."""
    ns = Proc("namesrv", "NAMESRV", ns_port or _free_port(), 0, None, home / "logs" / "namesrv.log")
    brokers = []
    for i, name in enumerate(MODES[mode]):
        port = base_port + 10 * i if base_port else _free_port()
        ha_port = port + 1 if base_port else _free_port()
        text = conf_text(mode, name)
        d = home / name
        d.mkdir(parents=True, exist_ok=True)
        extra = {
            "namesrvAddr": f"127.0.0.1:{ns.port}",
            "brokerIP1": "127.0.0.1",
            "listenPort": str(port),
            "haListenPort": str(ha_port),
            "storePathRootDir": str(d / "store"),
            **(SMALL_STORE if small else {}),
        }
        conf = d / "broker.conf"
        conf.write_text(
            f"# conf/{mode}/{name}.properties, as shipped\n{text}\n"
            "# rocketq cluster: one machine, so distinct ports and store directories\n"
            + "".join(f"{k}={v}\n" for k, v in extra.items())
        )
        brokers.append(Proc(name, _role_of(text), port, ha_port, conf, home / "logs" / f"{name}.log"))
    return ns, brokers


def _spawn(p: Proc, args: list[str]) -> None:
    p.log.parent.mkdir(parents=True, exist_ok=True)
    out = open(p.log, "ab")  # noqa: SIM115  (the child owns it)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "rocketq.cli", *args]
    p.popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    out.close()


def _wait_boot(p: Proc, line: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.popen is not None and p.popen.poll() is not None:
            raise RuntimeError(f"{p.name} exited ({p.popen.returncode}); see {p.log}")
        try:
            if line in p.log.read_text(errors="replace"):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{p.name} did not boot within {timeout:.0f} s; see {p.log}")


def _stop(procs: list[Proc]) -> None:
    for p in reversed(procs):
        if p.popen is not None and p.popen.poll() is None:
            p.popen.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        if p.popen is not None:
            try:
                p.popen.wait(20)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait(5)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="rocketq cluster", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", required=True, help="2m-noslave | 2m-2s-async | 2m-2s-sync | controller")
    ap.add_argument("--home", default=os.environ.get("ROCKETQ_HOME", "~/.rocketq-cluster"), help="data dir")
    ap.add_argument("--namesrv-port", type=int, default=9876, help="0: any free port")
    ap.add_argument("--base-port", type=int, default=10911,
                    help="first broker's listenPort, +10 per broker, HA port +1 (0: free ports)")  # fmt: skip
    ap.add_argument("--small-store", action="store_true", help="64 MiB CommitLog segments, small index files")
    a = ap.parse_args(argv)
    if a.mode == "controller":
        print("rocketq cluster: controller mode (5.x automatic master election) is not supported yet; "
              "use 2m-2s-sync or 2m-2s-async", file=sys.stderr)  # fmt: skip
        return 2
    if a.mode not in MODES:
        print(
            f"rocketq cluster: unknown mode {a.mode!r} (one of {', '.join(MODES)}, controller)",
            file=sys.stderr,
        )
        return 2
    home = Path(os.path.expanduser(a.home)).absolute()
    home.mkdir(parents=True, exist_ok=True)
    ns, brokers = plan(a.mode, home, a.namesrv_port, a.base_port, a.small_store)
    procs = [ns, *brokers]
    stop = False

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        _spawn(ns, ["namesrv", "-p", str(ns.port), "--home", str(home / "namesrv")])
        _wait_boot(ns, NAMESRV_BOOT)
        for b in brokers:  # masters first: conf order lists them first
            _spawn(b, ["broker", "-c", str(b.conf)])
            _wait_boot(b, BROKER_BOOT)
    except RuntimeError as exc:
        print(f"rocketq cluster: {exc}", file=sys.stderr)
        _stop(procs)
        return 1
    print(f"rocketq cluster {a.mode}: NameServer 127.0.0.1:{ns.port}  (home {home})")
    print(f"{'#Name':<12} {'#Role':<13} {'#Addr':<17} {'#HAPort':<8} {'#PID':<8} #Log")
    for p in procs:
        assert p.popen is not None
        ha = str(p.ha_port) if p.role not in ("NAMESRV", "SLAVE") else "-"
        print(f"{p.name:<12} {p.role:<13} {'127.0.0.1:' + str(p.port):<17} {ha:<8} {p.popen.pid:<8} {p.log}")
    print("The cluster boot success. Ctrl-C stops it.", flush=True)
    try:
        while not stop:
            time.sleep(0.5)
            for p in procs:
                if p.popen is not None and p.popen.poll() is not None and not p.reported:
                    print(f"{p.name} (pid {p.popen.pid}) exited with {p.popen.returncode}", flush=True)
                    p.reported = True
    finally:
        _stop(procs)
        print("rocketq cluster shutdown.", flush=True)
    return 0
