"""The machine's own limits, measured in the same run as the brokers: sequential write with fdatasync (dd),
a Python append+fdatasync loop (the per-message fsync ceiling), loopback TCP bulk and a 64-byte asyncio
ping-pong (the floor of any Python request/reply). Server side pinned like the brokers, client side like
the load generator."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import time
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.common import free_port, taskset, wait_port

_NULL_LEN = struct.Struct(">I")


def dd_write(directory: str, mib: int) -> dict[str, float]:
    path = os.path.join(directory, "dd.bin")
    t0 = time.monotonic()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fdatasync"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    took = time.monotonic() - t0
    os.remove(path)
    return {"mib": mib, "seconds": took, "mb_s": mib * 1048576 / took / 1e6}


def fsync_loop(directory: str, size: int, seconds: float) -> float:
    """write(size) + fdatasync per message, appending: what per-message durability costs."""
    path = os.path.join(directory, f"fsync{size}.bin")
    buf = os.urandom(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    n = 0
    t0 = time.monotonic()
    end = t0 + seconds
    try:
        while True:
            os.write(fd, buf)
            os.fdatasync(fd)
            n += 1
            if n % 16 == 0 and time.monotonic() >= end:
                break
    finally:
        os.close(fd)
        os.remove(path)
    return n / (time.monotonic() - t0)


class _Ack(asyncio.Protocol):
    """The null broker (sys_null.py): one ack byte per length-prefixed frame."""

    def connection_made(self, transport: Any) -> None:
        self.t = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        n = pos = 0
        while len(buf) - pos >= 4:
            size = _NULL_LEN.unpack_from(buf, pos)[0]
            if len(buf) - pos - 4 < size:
                break
            pos += 4 + size
            n += 1
        del buf[:pos]
        if n:
            self.t.write(b"\x01" * n)


async def _null_server(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_Ack, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


# -- loopback (two processes, pinned) -------------------------------------------------------------------
async def _echo_server(port: int, seconds: float) -> None:
    class Echo(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.t = transport

        def data_received(self, data: bytes) -> None:
            self.t.write(data)

    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", port)
    await asyncio.sleep(seconds)
    server.close()


async def _pingpong_client(port: int, seconds: float) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    msg = b"x" * 64
    n = 0
    done = loop.create_future()
    end = time.monotonic() + seconds

    class Ping(asyncio.Protocol):
        got = 0

        def connection_made(self, transport: Any) -> None:
            self.t = transport
            transport.write(msg)

        def data_received(self, data: bytes) -> None:
            nonlocal n
            self.got += len(data)
            while self.got >= 64:
                self.got -= 64
                n += 1
                if n % 64 == 0 and time.monotonic() >= end:
                    if not done.done():
                        done.set_result(None)
                    return
                self.t.write(msg)

    t0 = time.monotonic()
    transport, _ = await loop.create_connection(Ping, "127.0.0.1", port)
    await done
    took = time.monotonic() - t0
    transport.close()
    return {"rt_s": n / took}


def _sink_server(port: int, seconds: float) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    s.settimeout(seconds)
    buf = bytearray(1 << 20)
    while True:  # the first connection is wait_port's probe
        c, _ = s.accept()
        while c.recv_into(buf):
            pass
        c.close()


def _bulk_client(port: int, seconds: float) -> dict[str, float]:
    c = socket.create_connection(("127.0.0.1", port))
    chunk = b"\0" * (1 << 20)
    n = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        c.sendall(chunk)
        n += 1
    took = time.monotonic() - t0
    c.close()
    return {"mb_s": n * len(chunk) / took / 1e6}


def _run_loop(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def _pair(kind: str, seconds: float, server_cpu: int | None, client_cpu: int | None) -> dict[str, float]:
    port = free_port()
    me = os.path.abspath(__file__)
    srv = subprocess.Popen(
        [*taskset(server_cpu), sys.executable, me, f"{kind}-server", str(port), str(seconds + 10)],
        stdout=subprocess.DEVNULL,
    )
    try:
        if not wait_port(port, 10, lambda: srv.poll() is None):
            raise RuntimeError("limits server did not start")
        out = subprocess.run(
            [*taskset(client_cpu), sys.executable, me, f"{kind}-client", str(port), str(seconds)],
            capture_output=True,
            timeout=seconds + 30,
            check=True,
        )
        return json.loads(out.stdout.decode().strip().splitlines()[-1])
    finally:
        srv.kill()
        srv.wait()


def loopback_bulk(seconds: float, server_cpu: int | None, client_cpu: int | None) -> float:
    return _pair("bulk", seconds, server_cpu, client_cpu)["mb_s"]


def pingpong(seconds: float, server_cpu: int | None, client_cpu: int | None) -> float:
    return _pair("pingpong", seconds, server_cpu, client_cpu)["rt_s"]


def measure(
    directory: str,
    sizes: list[int],
    dd_mib: int,
    seconds: float,
    server_cpu: int | None,
    client_cpu: int | None,
) -> dict[str, Any]:
    return {
        "dd": dd_write(directory, dd_mib),
        "fsync_loop": {str(s): fsync_loop(directory, s, seconds) for s in sizes},
        "loopback_mb_s": loopback_bulk(seconds, server_cpu, client_cpu),
        "pingpong_rt_s": pingpong(seconds, server_cpu, client_cpu),
    }


if __name__ == "__main__":
    kind, port_s, secs_s = sys.argv[1], sys.argv[2], sys.argv[3]
    port, secs = int(port_s), float(secs_s)
    if kind == "pingpong-server":
        _run_loop(_echo_server(port, secs))
    elif kind == "pingpong-client":
        print(json.dumps(_run_loop(_pingpong_client(port, secs))))
    elif kind == "bulk-server":
        _sink_server(port, secs)
    elif kind == "null-server":
        _run_loop(_null_server(port))
    elif kind == "bulk-client":
        print(json.dumps(_bulk_client(port, secs)))
