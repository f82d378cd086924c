"""Remoting round trips per second vs a bare asyncio echo server, side by side in one run.

    .venv/bin/python bench/remoting_bench.py [--seconds 3] [--reps 3] [--windows 1,64] [--no-uvloop]

Two server processes run for the whole benchmark (pinned to the last CPU, the load generator to the
first when there are two or more):
  * rocketq: RemotingServer with one inline processor answering a small request (JSON header, no body);
    the load generator uses RemotingClient.invoke from W concurrent coroutines.
  * echo:    an asyncio.Protocol that writes back whatever it reads; the client keeps W fixed-size
    64-byte messages in flight (no framing, no decoding): the floor for any Python request/reply.
Measurements alternate (echo, rocketq, echo, rocketq, ...) and each ratio is rocketq / echo of the
same repetition. Prints a markdown table (median, min, max) for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import NamedTuple

from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient, RemotingServer, run, uvloop_enabled

PING_CODE = 1000
ECHO_MSG = 64
COALESCE = os.environ.get("RQ_BENCH_COALESCE", "1") == "1"


# -- servers (run in child processes) ----------------------------------------------------------
async def serve_rocketq(port: int) -> None:
    server = RemotingServer("127.0.0.1", port, idle_timeout_s=0)
    server.register_processor(PING_CODE, lambda ch, req: req.response(0))
    await server.start()
    print(f"READY {server.port}", flush=True)
    await asyncio.Event().wait()


class EchoServer(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[attr-defined]


async def serve_echo(port: int) -> None:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(EchoServer, "127.0.0.1", port)
    print(f"READY {srv.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


# -- load generators -----------------------------------------------------------------------------
class EchoClient(asyncio.Protocol):
    """Keeps ``window`` 64-byte messages in flight; counts whole messages coming back."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.done = 0
        self.pending_bytes = 0
        self.payload = b"x" * ECHO_MSG
        self.running = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.transport.write(self.payload * self.window)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.pending_bytes += len(data)
        n, self.pending_bytes = divmod(self.pending_bytes, ECHO_MSG)
        self.done += n
        if n and self.running:
            self.transport.write(self.payload * n)  # type: ignore[attr-defined]


class Sample(NamedTuple):
    rate: float  # round trips per second
    client_us: float  # CPU microseconds per round trip, load generator
    server_us: float  # CPU microseconds per round trip, server process


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid

    def start(self, n: int) -> None:
        self.n0, self.t0 = n, time.perf_counter()
        self.c0, self.s0 = time.process_time(), proc_cpu_s(self.pid)

    def stop(self, n: int) -> Sample:
        t1, c1, s1 = time.perf_counter(), time.process_time(), proc_cpu_s(self.pid)
        count = max(1, n - self.n0)
        return Sample(count / (t1 - self.t0), (c1 - self.c0) * 1e6 / count, (s1 - self.s0) * 1e6 / count)


async def measure_echo(port: int, pid: int, window: int, seconds: float, warmup: float) -> Sample:
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_connection(lambda: EchoClient(window), "127.0.0.1", port)
    await asyncio.sleep(warmup)
    meter = Meter(pid)
    meter.start(proto.done)
    await asyncio.sleep(seconds)
    sample = meter.stop(proto.done)
    proto.running = False
    transport.close()
    return sample


async def measure_rocketq(port: int, pid: int, window: int, seconds: float, warmup: float) -> Sample:
    addr = f"127.0.0.1:{port}"
    client = RemotingClient(coalesce_writes=COALESCE)
    count = 0
    stop = False

    async def worker() -> None:
        nonlocal count
        while not stop:
            resp = await client.invoke(addr, RemotingCommand.request(PING_CODE), 5.0)
            if resp.code != 0:
                raise RuntimeError(f"unexpected response {resp}")
            count += 1

    await client.invoke(addr, RemotingCommand.request(PING_CODE))  # connect
    tasks = [asyncio.ensure_future(worker()) for _ in range(window)]
    await asyncio.sleep(warmup)
    meter = Meter(pid)
    meter.start(count)
    await asyncio.sleep(seconds)
    sample = meter.stop(count)
    stop = True
    await asyncio.gather(*tasks)
    await client.close()
    return sample


# -- orchestration -------------------------------------------------------------------------------
def start_server(kind: str, no_uvloop: bool, cpu: int | None) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ}
    if no_uvloop:
        env["ROCKETQ_NO_UVLOOP"] = "1"
    cmd = [sys.executable, __file__, "--serve", kind]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"{kind} server failed to start: {line!r}")
    return proc, int(line.split()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", choices=["rocketq", "echo"])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--windows", default="1,64")
    ap.add_argument("--no-uvloop", action="store_true")
    a = ap.parse_args()
    if a.no_uvloop:
        os.environ["ROCKETQ_NO_UVLOOP"] = "1"
    if a.serve:
        run(serve_rocketq(0) if a.serve == "rocketq" else serve_echo(0))
        return

    ncpu = os.cpu_count() or 1
    server_cpu = ncpu - 1 if ncpu >= 2 else None
    if server_cpu is not None:
        os.sched_setaffinity(0, {0})
    windows = [int(w) for w in a.windows.split(",")]
    servers = {k: start_server(k, a.no_uvloop, server_cpu) for k in ("echo", "rocketq")}
    results: dict[tuple[str, int], list[Sample]] = {}
    try:
        for rep in range(a.reps):
            for w in windows:
                for kind in ("echo", "rocketq"):
                    fn = measure_echo if kind == "echo" else measure_rocketq
                    proc, port = servers[kind]
                    sm = run(fn(port, proc.pid, w, a.seconds, a.warmup))
                    results.setdefault((kind, w), []).append(sm)
                    print(
                        f"rep {rep + 1} window {w:>3} {kind:>7}: {sm.rate:>10,.0f} rt/s  "
                        f"CPU/rt client {sm.client_us:6.1f} us server {sm.server_us:6.1f} us",
                        file=sys.stderr,
                    )
    finally:
        for proc, _ in servers.values():
            proc.kill()
            proc.wait()

    pinning = f"server on CPU {server_cpu}, load generator on CPU 0" if server_cpu is not None else "unpinned"
    print(
        f"\nmachine: nproc={ncpu}, {platform.machine()}, Python {platform.python_version()}, "
        f"uvloop {'on' if uvloop_enabled() else 'off'}, "
        f"client request coalescing {'on' if COALESCE else 'off'}, "
        f"{pinning}, load average {os.getloadavg()[0]:.2f} at the end"
    )
    print(f"command: {' '.join(['.venv/bin/python', 'bench/remoting_bench.py', *sys.argv[1:]])}\n")
    print("| in flight | bare asyncio echo rt/s median [min–max] | rocketq rt/s | ratio median [min–max] |")
    print("|---|---|---|---|")
    for w in windows:
        echo = [s.rate for s in results[("echo", w)]]
        rq = [s.rate for s in results[("rocketq", w)]]
        ratios = [r / e for r, e in zip(rq, echo, strict=True)]

        def fmt(xs: list[float]) -> str:
            return f"{statistics.median(xs):,.0f} [{min(xs):,.0f}–{max(xs):,.0f}]"

        print(
            f"| {w} | {fmt(echo)} | {fmt(rq)} | "
            f"{statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}] |"
        )
    print("\nCPU microseconds per round trip (median of the repetitions):\n")
    print("| in flight | echo client | echo server | rocketq client | rocketq server |")
    print("|---|---|---|---|---|")
    for w in windows:
        e, r = results[("echo", w)], results[("rocketq", w)]

        def med(xs: list[Sample], attr: str) -> str:
            return f"{statistics.median(getattr(x, attr) for x in xs):.1f}"

        print(
            f"| {w} | {med(e, 'client_us')} | {med(e, 'server_us')} | "
            f"{med(r, 'client_us')} | {med(r, 'server_us')} |"
        )


if __name__ == "__main__":
    main()
