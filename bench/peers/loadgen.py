"""Load generator worker: one process per role (producer or consumer), driven by JSON lines on stdin,
answering JSON lines on stdout. Every system is driven by this same asyncio code; only the adapter's
publish / subscribe differ.

Producer, closed loop: ``window`` coroutines each awaiting its publish (max throughput).
Producer, open loop: message i is due at t0 + i/rate; its intended time is stamped into the body and
latency is measured from it, so a stalled broker is charged for every message it delayed (no
coordinated omission); at most ``window`` publishes are in flight."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
import traceback
from typing import Any

if __package__ in (None, ""):  # run as a script: make "bench.peers" importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "bench.peers"

from bench.peers.base import Membership
from bench.peers.common import (
    AUTO_BATCH,
    TS,
    WARMUP_TS,
    new_hist,
    now_ns,
    payload_template,
    percentiles,
    stamp,
)

SYSTEMS = {
    "rocketq": "sys_rocketq",
    "redis": "sys_redis",
    "rabbitmq": "sys_rabbitmq",
    "nats": "sys_nats",
    "beanstalkd": "sys_beanstalkd",
    "null": "sys_null",
}


def client_class(system: str) -> Any:
    return importlib.import_module(f"bench.peers.{SYSTEMS[system]}").CLIENT


MIN_DRAIN = 1000


class Worker:
    def __init__(self) -> None:
        self.client: Any = None
        self.clients: list[Any] = []  # a shape's producers or consumers: independent connections, one process
        self.count = 0
        self.t_first = 0
        self.t_last = 0
        self.e2e: Any = None
        self.done: asyncio.Event | None = None
        self.expect: int | None = None
        self.t_ready = 0

    # -- producer ----------------------------------------------------------------------------------
    async def produce(self, c: dict[str, Any]) -> dict[str, Any]:
        topic, size, window = c["topic"], int(c["size"]), int(c["window"])
        batch = int(c.get("batch") or 0)
        rate = c.get("rate")
        buf = payload_template(size)
        # every client (producer) gets `window` publishes in flight of its own
        sends = [self._sender(cl, topic, buf, batch) for cl in self.clients]
        per = batch if batch > 0 else 1
        if c.get("warmup_s"):
            await self._closed(sends, window, float(c["warmup_s"]), warm=True)
        hist = new_hist()
        cpu0 = time.process_time()
        if rate:
            late = c.get("max_late_ms")
            r = await self._open(
                sends[0], window, float(c["seconds"]), float(rate) / per, hist, late and float(late)
            )
            r["intended"] *= per
        else:
            r = await self._closed(sends, window, float(c["seconds"]), hist=hist)
        r["client_cpu_us"] = (time.process_time() - cpu0) / (r["n"] * per) * 1e6 if r["n"] else None
        r["n"] *= per
        r["ack"] = percentiles(hist)
        return r

    @staticmethod
    def _sender(cl: Any, topic: str, buf: bytearray, batch: int) -> Any:
        if batch == AUTO_BATCH:

            async def send(ts: int) -> None:
                await cl.publish_auto(topic, stamp(buf, ts))
        elif batch:

            async def send(ts: int) -> None:
                body = stamp(buf, ts)
                await cl.publish_batch(topic, [body] * batch)
        else:

            async def send(ts: int) -> None:
                await cl.publish(topic, stamp(buf, ts))

        return send

    async def _closed(
        self, sends: list[Any], window: int, seconds: float, warm: bool = False, hist: Any = None
    ) -> dict[str, Any]:
        end = now_ns() + int(seconds * 1e9)
        n = errors = 0
        first_error = ""
        last_ack = t0 = now_ns()

        async def one(send: Any) -> None:
            nonlocal n, errors, first_error, last_ack
            while True:
                ts = now_ns()
                if ts >= end:
                    return
                try:
                    await send(WARMUP_TS if warm else ts)
                except Exception as exc:
                    errors += 1
                    first_error = first_error or repr(exc)
                    await asyncio.sleep(0.01)
                    continue
                last_ack = now_ns()
                n += 1
                if hist is not None:
                    hist.record_value(max(1, (last_ack - ts) // 1000))

        await asyncio.gather(*(one(send) for send in sends for _ in range(window)))
        return {
            "n": n,
            "errors": errors,
            "first_error": first_error,
            "elapsed_s": (last_ack - t0) / 1e9,
            "t_start": t0,
        }

    async def _open(
        self, send: Any, window: int, seconds: float, rate: float, hist: Any, max_late_ms: float | None = None
    ) -> dict[str, Any]:
        """Publish on a fixed schedule with at most ``window`` in flight. With ``max_late_ms``, stop once a
        send could not start within that long of its intended time (``behind``: the rate is not sustained)."""
        sem = asyncio.Semaphore(window)
        loop = asyncio.get_running_loop()
        interval = 1e9 / rate
        t0 = now_ns() + 1_000_000
        total = int(seconds * rate)
        n = errors = 0
        first_error = ""
        last_ack = t0
        pending: set[asyncio.Task[None]] = set()

        async def one(intended: int) -> None:
            nonlocal n, errors, first_error, last_ack
            # late: measured from the intended time (no coordinated omission); up to 200 us early (no sleep
            # that short): measured from when it actually started, never a negative latency
            intended = min(intended, now_ns())
            try:
                await send(intended)
            except Exception as exc:
                errors += 1
                first_error = first_error or repr(exc)
                return
            finally:
                sem.release()
            last_ack = now_ns()
            n += 1
            hist.record_value(max(1, (last_ack - intended) // 1000))

        max_late = int(max_late_ms * 1e6) if max_late_ms else None
        behind = False
        for i in range(total):
            intended = t0 + int(i * interval)
            delay = intended - now_ns()
            if delay > 200_000:
                await asyncio.sleep(delay / 1e9)
            await sem.acquire()
            if max_late is not None and now_ns() - intended > max_late:
                sem.release()
                behind = True
                break
            t = loop.create_task(one(intended))
            pending.add(t)
            t.add_done_callback(pending.discard)
        if pending:
            await asyncio.wait(pending, timeout=60)
        return {
            "n": n,
            "intended": total,
            "behind": behind,
            "errors": errors,
            "first_error": first_error,
            "elapsed_s": (last_ack - t0) / 1e9,
        }

    # -- consumer ----------------------------------------------------------------------------------
    def on_bodies(self, bodies: list[Any]) -> None:
        t = now_ns()
        unpack = TS.unpack_from
        hist = self.e2e
        for b in bodies:
            ts = unpack(b, 0)[0]
            if ts == WARMUP_TS:
                continue
            if not self.count:
                self.t_first = t
            self.count += 1
            hist.record_value(max(1, (t - ts) // 1000))
        self.t_last = t
        if self.expect is not None and self.count >= self.expect and self.done is not None:
            self.done.set()

    async def subscribe(self, c: dict[str, Any]) -> dict[str, Any]:
        self.count = 0
        self.t_first = self.t_last = 0
        self.e2e = new_hist()
        self.expect = None
        self.done = asyncio.Event()
        t0 = time.monotonic()
        self.cpu0 = time.process_time()
        self.t_ready = now_ns()  # messages may arrive before subscribe() returns (rebalance wait)
        # one group per client (fan-out: different groups; 4 consumers: the same group four times)
        groups = c.get("groups") or [c["group"]] * len(self.clients)
        queues, fanout = c.get("queues"), bool(c.get("fanout"))
        for i, (cl, g) in enumerate(zip(self.clients, groups, strict=True)):
            m = Membership(index=i, members=groups.count(g), queues=queues, fanout=fanout)
            await cl.subscribe(c["topic"], g, self.on_bodies, m)
        for cl in self.clients:  # e.g. until a rebalance has split the queues among the members
            await cl.settle()
        return {"ready_s": time.monotonic() - t0}

    async def drain(self, c: dict[str, Any]) -> dict[str, Any]:
        assert self.done is not None
        self.expect = int(c["expect"])
        if self.count >= self.expect:
            self.done.set()
        try:
            await asyncio.wait_for(self.done.wait(), float(c.get("timeout_s", 60)))
        except TimeoutError:
            pass
        for cl in self.clients:
            try:  # a client whose unsubscribe hangs must not hang the harness
                await asyncio.wait_for(cl.unsubscribe(), 15)
            except Exception as exc:
                print(f"unsubscribe: {exc!r}", file=sys.stderr, flush=True)
        stored = None
        if self.count < self.expect:  # short: does the broker hold them (consumer problem) or not (lost)?
            try:
                stored = await asyncio.wait_for(self.client.stored_count(c["topic"]), 20)
            except Exception as exc:
                stored = repr(exc)
        # steady drain rate, first to last message (startup excluded; reported apart as first_s); a
        # backlog smaller than MIN_DRAIN may arrive in one or two fetches, which gives no rate
        span = (self.t_last - self.t_first) / 1e9 if self.count else 0.0
        return {
            "n": self.count,
            "span_s": span,
            "rate": (self.count - 1) / span if span > 0 and self.count >= MIN_DRAIN else None,
            "first_s": (self.t_first - self.t_ready) / 1e9 if self.count else None,
            "e2e": percentiles(self.e2e),
            "stored": stored,
            "client_cpu_us": (time.process_time() - self.cpu0) / self.count * 1e6 if self.count else None,
            "t_first": self.t_first,
            "t_last": self.t_last,
        }

    # -- dispatch ----------------------------------------------------------------------------------
    async def handle(self, c: dict[str, Any]) -> dict[str, Any]:
        op = c["op"]
        if op == "init":
            cls = client_class(c["system"])
            self.clients = [cls({**c["args"], "member": i}) for i in range(int(c.get("clients", 1)))]
            self.client = self.clients[0]
            for cl in self.clients:
                await asyncio.wait_for(cl.connect(c["role"]), 60)
            return {"ok": True}
        if op == "prepare":
            shape = {"queues": c.get("queues"), "groups": c.get("groups")}
            for t in c["topics"]:
                await asyncio.wait_for(self.client.prepare(t, **shape), 60)
            return {"ok": True}
        if op == "produce":
            return await self.produce(c)
        if op == "subscribe":
            return await asyncio.wait_for(self.subscribe(c), 60)
        if op == "drain":
            return await self.drain(c)
        if op == "first_publish":  # recovery: retry until one publish is acknowledged
            deadline = time.monotonic() + float(c.get("timeout_s", 60))
            buf = payload_template(int(c.get("size", 128)))
            while True:
                try:
                    if self.client is None:
                        self.client = client_class(c["system"])(c["args"])
                        self.clients = [self.client]
                        await asyncio.wait_for(self.client.connect("producer"), 10)
                    await asyncio.wait_for(self.client.publish(c["topic"], stamp(buf, WARMUP_TS)), 10)
                    return {"ok": True, "t": now_ns()}
                except Exception as exc:
                    if time.monotonic() > deadline:
                        return {"ok": False, "error": repr(exc)}
                    if self.client is not None:
                        try:
                            await asyncio.wait_for(self.client.close(), 2)
                        except BaseException:
                            pass
                    self.client = None
                    self.clients = []
                    await asyncio.sleep(0.05)
        if op == "exit":
            for cl in self.clients:
                await asyncio.wait_for(cl.close(), 10)
            return {"ok": True, "exit": True}
        raise ValueError(f"unknown op {op}")


async def main() -> None:
    w = Worker()
    loop = asyncio.get_running_loop()
    out = sys.stdout
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        c = json.loads(line)
        try:
            r = await w.handle(c)
        except BaseException as exc:  # report, keep serving
            r = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-1500:]}
        out.write(json.dumps(r) + "\n")
        out.flush()
        if r.get("exit"):
            break


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
    os._exit(0)  # do not wait for third-party background threads
