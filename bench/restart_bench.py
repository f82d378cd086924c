"""Restart time of a killed broker: fill a `rocketq standalone`, kill -9 it, start it again on the same data.

    python bench/restart_bench.py [--tier A] [--seconds 5] [--topics 40] [--runs 2] [--pyspy FILE]

Each run: a fresh data dir; `--topics` topics of 4 queues; 64 sends of 1 KiB in flight for `--seconds`;
SIGKILL the server tree; then seconds from the new process's start to the broker port accepting connections
(what the peers benchmark's recovery row counts before its first publish). --pyspy records the restart
(raw, 200 Hz, 9 s) into FILE for the last run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.peers.common import wait_port
from bench.peers.sys_rocketq import RocketqClient, RocketqServer


async def fill(server: RocketqServer, seconds: float, topics: int) -> int:
    from rocketq.aio import Message, Producer
    from rocketq.client.message import MQClientError

    client = RocketqClient(server.client_args())
    for i in range(topics):
        await client.prepare(f"T{i}")
    p = Producer("restart_bench", namesrv=server.client_args()["namesrv"])
    await p.start()
    body = os.urandom(1024)
    sent = 0
    t_end = time.monotonic() + seconds

    async def sender(i: int) -> None:
        nonlocal sent
        while time.monotonic() < t_end:
            try:
                await p.send(Message(f"T{i % topics}", body))
            except MQClientError:  # a slow machine's send timeout: the fill only has to make data
                continue
            sent += 1

    await asyncio.gather(*(sender(i) for i in range(64)))
    await p.shutdown()
    return sent


def one_run(a: argparse.Namespace, pyspy: str | None) -> tuple[int, float, int]:
    root = tempfile.mkdtemp(prefix="rq-restart-")
    server = RocketqServer(a.tier, root, 1)
    spy = None
    try:
        server.prepare()
        server.start()
        sent = asyncio.run(fill(server, a.seconds, a.topics))
        server.kill9()
        used = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
        t0 = time.monotonic()
        if pyspy:
            exe = os.path.join(os.path.dirname(sys.executable), "py-spy")
            cmd = [exe, "record", "-o", pyspy, "-f", "raw", "-r", "200", "-d", "9", "--", *server.command()]
            spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not wait_port(server.broker_port, 120, lambda: spy.poll() is None):
                raise RuntimeError("the restarted broker did not open its port")
            took = time.monotonic() - t0
            spy.wait()
        else:
            server.start()
            took = time.monotonic() - t0
        return sent, took, used
    finally:
        if spy is not None and spy.poll() is None:
            spy.kill()
        subprocess.run(["pkill", "-9", "-f", root], check=False)
        server.kill9()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", choices=["A", "B"], default="A")
    p.add_argument("--seconds", type=float, default=5.0, help="fill time")
    p.add_argument("--topics", type=int, default=40)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--pyspy", default=None, help="record the last run's restart into this file")
    a = p.parse_args()
    for i in range(a.runs):
        sent, took, used = one_run(a, a.pyspy if i == a.runs - 1 else None)
        gib = used / 2**30
        print(f"run {i}: {sent:,} messages acknowledged, {gib:.2f} GiB of files, restart → port {took:.2f} s")


if __name__ == "__main__":
    main()
