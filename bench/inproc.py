"""What the in-process client benches (client_send_bench, consume_path_bench) share: a throwaway
`rocketq standalone` for the client to start against, running a bench coroutine, and the interleaved A/B of
two source trees (each round runs the script once per tree, PYTHONPATH=tree/src, order alternating)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from bench.peers.sys_rocketq import DISK_GUARD_CONF


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_port(port: int) -> None:
    for _ in range(150):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise RuntimeError("broker did not start")


@contextlib.asynccontextmanager
async def standalone(prefix: str) -> AsyncIterator[str]:
    """An ASYNC_FLUSH `rocketq standalone` in a temp dir; yields its NameServer address."""
    with tempfile.TemporaryDirectory(prefix=prefix) as root:
        ns, bp = free_port(), free_port()
        conf = os.path.join(root, "broker.conf")
        with open(conf, "w") as f:
            f.write("brokerName=broker-a\nflushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=false\n")
            f.write(DISK_GUARD_CONF)
        home = os.path.join(root, "home")
        cmd = [sys.executable, "-m", "rocketq.cli", "standalone", "--no-console", "--home", home,
               "--namesrv-port", str(ns), "--broker-port", str(bp), "-c", conf,
               "--log-level", "WARNING"]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await wait_port(bp)
            yield f"127.0.0.1:{ns}"
        finally:
            proc.terminate()
            proc.wait()


def run(bench: Callable[[], Awaitable[Any]]) -> Any:
    """Run the bench coroutine on uvloop (what the broker and the peers' load generator use) if present."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(bench())  # type: ignore[arg-type]
    return uvloop.run(bench())  # type: ignore[arg-type]


def ab_rounds(script: str, trees: list[str], rounds: int, args: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Run ``script --json *args`` once per tree per round (order alternating); each run's last stdout line
    is its JSON result. Exits with the child's output if a run fails."""
    pooled: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    for rnd in range(rounds):
        for tree in trees if rnd % 2 == 0 else trees[::-1]:
            env = dict(os.environ, PYTHONPATH=f"{tree}/src")
            cmd = [sys.executable, os.path.abspath(script), "--json", *args]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if r.returncode:
                sys.exit(f"{tree} failed:\n{r.stdout}\n{r.stderr}")
            res = json.loads(r.stdout.strip().splitlines()[-1])
            pooled[tree].append(res)
            print(f"round {rnd} {tree}: " + "  ".join(f"{k} {v:.3f}" for k, v in res.items()), flush=True)
    return pooled


def bench_parser(doc: str | None, n_default: int, n_help: str) -> argparse.ArgumentParser:
    """The options both benches take; a script adds its own before parsing."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=n_default, help=n_help)
    p.add_argument("--runs", type=int, default=5, help="measured runs (after one warm-up run)")
    p.add_argument("--size", type=int, default=128, help="body bytes")
    p.add_argument("--json", action="store_true", help="print the result as JSON (for --ab)")
    p.add_argument("--ab", nargs=2, metavar="TREE", help="compare two source trees, interleaved")
    p.add_argument("--rounds", type=int, default=3, help="--ab: child processes per tree")
    return p


def bench_main(
    a: argparse.Namespace,
    bench: Callable[[argparse.Namespace], Awaitable[dict[str, Any]]],
    ab: Callable[[argparse.Namespace], None],
    show: Callable[[dict[str, Any]], None],
) -> None:
    """--ab: the interleaved comparison; else one measurement, printed by ``show`` (or as JSON)."""
    if a.ab:
        ab(a)
        return
    res = run(lambda: bench(a))
    if a.json:
        print(json.dumps(res))
    else:
        show(res)
