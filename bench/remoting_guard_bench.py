"""Memory and connection attacks before authentication, against real broker and NameServer processes.

    python bench/remoting_guard_bench.py [--conns 100] [--held-mib 15] [--ns-conns 30] [--dribble 20]
        [--conf key=value ...] [--smoke] [--json FILE]
    rocketq bench guard ...

For each target (a broker, then a NameServer; both fresh processes with their stores in a temp dir):
  * baseline: the server's resident memory (VmRSS) after it booted;
  * half frames: ``--conns`` connections each declare a 16 MiB frame and send ``--held-mib`` MiB of it,
    then hold the connection open. The server's peak VmRSS over the phase is reported, and a normal request
    on a new connection is timed while the attack holds (does the server still answer the small traffic?);
  * dribble: ``--dribble`` connections each declare a frame and send one byte of it every 2 s; reported is how
    long the server keeps them open (without a frame deadline: until the phase ends);
  * many connections: connections are opened from 127.0.0.1 until the server refuses them or ``--max-open``.
Without a limit the half frames grow the server by about conns × held MiB; with rocketq's remoting limits
(docs/security.md) by at most ``serverMaxBufferedBytes``. ``--conf key=value`` is passed to both servers
(broker.conf / namesrv.conf), e.g. a short ``serverFrameReadTimeoutMillis`` for a quick run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

MIB = 1024 * 1024
FRAME_DECLARED = 16 * MIB  # the largest frame RocketMQ accepts by default
BROKER_BOOT = "boot success"
NAMESRV_BOOT = "The Name Server boot success"

SMALL_STORE = {
    "mapedFileSizeCommitLog": str(16 * MIB),
    "mapedFileSizeConsumeQueue": str(20 * 2000),
    "maxHashSlotNum": "5000",
    "maxIndexNum": "20000",
    "diskMaxUsedSpaceRatio": "99",
    "diskSpaceCleanForciblyRatio": "99",
    "diskSpaceWarningLevelRatio": "99",
}


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, kind: str, home: str, conf: dict[str, str], namesrv: str = "") -> None:
        self.kind = kind
        self.port = free_port()
        os.makedirs(home, exist_ok=True)
        conf_path = os.path.join(home, f"{kind}.conf")
        if kind == "broker":
            all_conf = {"storePathRootDir": os.path.join(home, "store"), **SMALL_STORE, **conf}
            args = ["broker", "-c", conf_path, "--port", str(self.port)]
            if namesrv:
                args += ["-n", namesrv]
            boot = BROKER_BOOT
        else:
            all_conf = dict(conf)
            args = ["namesrv", "-c", conf_path, "-p", str(self.port), "--home", home]
            boot = NAMESRV_BOOT
        with open(conf_path, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in all_conf.items()))
        self.log_path = os.path.join(home, f"{kind}.log")
        self._log = open(self.log_path, "w+")  # noqa: SIM115  (open while the process runs)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rocketq.cli", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{kind} exited: {self.output()[-2000:]}")
            if boot in self.output():
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"{kind} did not boot: {self.output()[-2000:]}")

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def output(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def rss(self) -> tuple[int, int]:
        return rss_kib(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


@dataclass
class Result:
    target: str
    baseline_rss_mib: float = 0.0
    conns: int = 0
    held_mib: float = 0.0
    sent_mib: float = 0.0  # what the attack connections got the server's socket to accept in total
    peak_rss_mib: float = 0.0
    growth_mib: float = 0.0
    after_close_rss_mib: float = 0.0  # 1 s after the attackers closed (a paused connection notices later)
    later_rss_mib: float = 0.0  # after the dribble phase (past the frame deadline)
    probe_ms: float | None = None  # a normal request on a new connection while the attack holds
    probe_ok: bool = False
    dribble_conns: int = 0
    dribble_closed: int = 0
    dribble_open_s: float | None = None  # median time a dribbling connection stayed open (None: never closed)
    open_conns: int = 0  # connections the server kept in the many-connections phase
    refused_conns: int = 0
    notes: list[str] = field(default_factory=list)


async def _probe(kind: str, addr: str) -> tuple[bool, float]:
    from rocketq.protocol.codes import RequestCode, ResponseCode
    from rocketq.protocol.frame import RemotingCommand
    from rocketq.remoting import RemotingClient

    code = RequestCode.GET_BROKER_RUNTIME_INFO if kind == "broker" else RequestCode.GET_BROKER_CLUSTER_INFO
    t0 = time.perf_counter()
    try:
        async with RemotingClient() as c:
            r = await c.invoke(addr, RemotingCommand.request(code, {}), 10.0)
        return r.code == ResponseCode.SUCCESS, (time.perf_counter() - t0) * 1000
    except Exception:
        return False, (time.perf_counter() - t0) * 1000


async def _half_frame(port: int, held: int, stop: asyncio.Event, sent: list[int]) -> None:
    """Declare a 16 MiB frame, send ``held`` bytes of it (as far as the server reads), hold until stop."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(struct.pack(">ii", FRAME_DECLARED, 2) + b"{}")
        chunk = b"\x00" * (256 * 1024)
        left = held
        while left > 0 and not stop.is_set():
            n = min(left, len(chunk))
            writer.write(chunk[:n])
            try:
                await asyncio.wait_for(writer.drain(), 2.0)
            except (TimeoutError, ConnectionError):
                break  # the server stopped reading (back-pressure) or closed us
            left -= n
            sent[0] += n
        await stop.wait()
    finally:
        writer.transport.abort()


async def half_frames(srv: Server, res: Result, conns: int, held: int, hold_s: float) -> None:
    stop = asyncio.Event()
    sent = [0]
    tasks = [asyncio.create_task(_half_frame(srv.port, held, stop, sent)) for _ in range(conns)]
    peak = 0
    t_end = time.monotonic() + hold_s
    probed = False
    while time.monotonic() < t_end:
        await asyncio.sleep(0.1)
        peak = max(peak, srv.rss()[0])
        if not probed and time.monotonic() > t_end - hold_s / 2:
            probed = True
            res.probe_ok, res.probe_ms = await _probe(srv.kind, srv.addr)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    res.conns, res.held_mib = conns, held / MIB
    res.sent_mib = sent[0] / MIB
    res.peak_rss_mib = peak / 1024
    res.growth_mib = res.peak_rss_mib - res.baseline_rss_mib
    await asyncio.sleep(1.0)
    res.after_close_rss_mib = srv.rss()[0] / 1024


async def _dribbler(port: int, stop: asyncio.Event, open_s: list[float]) -> None:
    t0 = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(struct.pack(">i", 4096))
        while not stop.is_set():
            try:
                await asyncio.wait_for(reader.read(1), 2.0)  # b"" or an error: the server closed us
                open_s.append(time.monotonic() - t0)
                return
            except TimeoutError:
                pass
            try:
                writer.write(b"\x00")
                await writer.drain()
            except ConnectionError:
                open_s.append(time.monotonic() - t0)
                return
    finally:
        writer.transport.abort()


async def dribble(srv: Server, res: Result, conns: int, phase_s: float) -> None:
    stop = asyncio.Event()
    open_s: list[float] = []
    tasks = [asyncio.create_task(_dribbler(srv.port, stop, open_s)) for _ in range(conns)]
    t_end = time.monotonic() + phase_s
    while time.monotonic() < t_end and len(open_s) < conns:
        await asyncio.sleep(0.2)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    res.dribble_conns = conns
    res.dribble_closed = len(open_s)
    res.dribble_open_s = sorted(open_s)[len(open_s) // 2] if open_s else None


def many_connections(srv: Server, res: Result, max_open: int) -> None:
    socks: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(max_open):
            s = socket.socket()
            try:
                s.connect(("127.0.0.1", srv.port))
            except OSError:
                s.close()
                refused += 1
                break
            socks.append(s)
        time.sleep(1.0)
        alive = 0
        for s in socks:  # a connection the server closed reads EOF (or a reset) at once
            s.setblocking(False)
            try:
                alive += s.recv(1) is None
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
        res.open_conns = alive
        res.refused_conns = len(socks) - alive + refused
    finally:
        for s in socks:
            s.close()


async def run_target(kind: str, a: argparse.Namespace, home: str, conf: dict[str, str]) -> Result:
    srv = Server(kind, os.path.join(home, kind), conf)
    res = Result(kind)
    try:
        time.sleep(1.0)
        res.baseline_rss_mib = srv.rss()[0] / 1024
        conns = a.conns if kind == "broker" else a.ns_conns
        await half_frames(srv, res, conns, int(a.held_mib * MIB), a.hold_s)
        if a.dribble:
            await dribble(srv, res, a.dribble, a.dribble_s)
        res.later_rss_mib = srv.rss()[0] / 1024
        if a.max_open:
            many_connections(srv, res, a.max_open)
        if srv.proc.poll() is not None:
            res.notes.append(f"{kind} died (exit {srv.proc.returncode})")
    finally:
        srv.stop()
    return res


def table(results: list[Result]) -> str:
    rows = [
        "| target | baseline RSS | half frames | accepted | peak RSS | growth | after close | later | probe "
        "| dribblers closed (median open) | connections kept / refused |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        dribble = (
            f"{r.dribble_closed}/{r.dribble_conns}"
            + (f" ({r.dribble_open_s:.0f} s)" if r.dribble_open_s is not None else " (never)")
            if r.dribble_conns
            else "-"
        )
        probe = f"{r.probe_ms:.0f} ms" if r.probe_ok and r.probe_ms is not None else "failed"
        rows.append(
            f"| {r.target} | {r.baseline_rss_mib:.0f} MiB | {r.conns} × {r.held_mib:g} MiB "
            f"| {r.sent_mib:.0f} MiB | {r.peak_rss_mib:.0f} MiB | {r.growth_mib:+.0f} MiB "
            f"| {r.after_close_rss_mib:.0f} MiB | {r.later_rss_mib:.0f} MiB | {probe} | {dribble} "
            f"| {r.open_conns} / {r.refused_conns} |"
        )
    return "\n".join(rows)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rocketq bench guard", description=__doc__.split("\n\n")[0])
    p.add_argument("--conns", type=int, default=100, help="half-frame connections to the broker")
    p.add_argument("--ns-conns", type=int, default=30, help="half-frame connections to the NameServer")
    p.add_argument("--held-mib", type=float, default=15.0, help="MiB of the declared 16 MiB each one sends")
    p.add_argument("--hold-s", type=float, default=20.0, help="how long the half frames are held")
    p.add_argument("--dribble", type=int, default=20, help="dribbling connections (0: skip)")
    p.add_argument("--dribble-s", type=float, default=75.0, help="longest the dribble phase runs")
    p.add_argument("--max-open", type=int, default=1500, help="connections to try to open (0: skip)")
    p.add_argument("--targets", default="broker,namesrv")
    p.add_argument("--conf", action="append", default=[], help="key=value for both servers' config files")
    p.add_argument("--smoke", action="store_true", help="small and quick: checks that numbers come out")
    p.add_argument("--json", help="write the results as JSON here")
    a = p.parse_args(argv)
    if a.smoke:
        a.conns, a.ns_conns, a.held_mib, a.hold_s = 4, 2, 2.0, 3.0
        a.dribble, a.dribble_s, a.max_open = 2, 6.0, 40
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    conf = dict(item.split("=", 1) for item in a.conf)
    results = []
    with tempfile.TemporaryDirectory(prefix="rq-guard-bench-") as home:
        for kind in a.targets.split(","):
            results.append(asyncio.run(run_target(kind.strip(), a, home, conf)))
    print(table(results))
    for r in results:
        for n in r.notes:
            print(f"note: {n}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
