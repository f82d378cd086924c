"""`rocketq bench peers`: rocketq against Redis Streams, RabbitMQ and NATS JetStream, side by side in one
run, and against the machine's limits (../shared/specs/benchmarks.md).

Per repetition, every (system, tier) in turn (interleaved: A B A B ...): fresh data dir, server pinned to
one CPU, a producer and a consumer worker process (loadgen.py) pinned to the other. Per cell (size,
in-flight window[, batch]): closed-loop max publish rate; the backlog it left is drained by a fresh
consumer (consume rate); then an open-loop run at a fraction of that rate with a live consumer gives
publish-ack and end-to-end latency. Then backlog catch-up after dropping the page cache, recovery
after kill -9 (tier A), CPU and bytes written per message from /proc of the server tree."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from .common import AUTO_BATCH, cpu_ticks, now_ns, steal_share, taskset
from .install import ensure_all, unavailable_systems

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SYSTEM_MODULES = {
    "null": "sys_null",
    "rocketq": "sys_rocketq",
    "redis": "sys_redis",
    "rabbitmq": "sys_rabbitmq",
    "nats": "sys_nats",
    "beanstalkd": "sys_beanstalkd",
}
SERVER_CPU, CLIENT_CPU = 1, 0


def batch_label(batch: int) -> str:
    return " auto-batch" if batch == AUTO_BATCH else f" batch{batch}" if batch else ""


@dataclass
class Plan:
    sizes: list[int] = field(default_factory=lambda: [128, 1024, 4096])
    windows: list[int] = field(default_factory=lambda: [1, 64])
    batch: int = 32  # rocketq batch send: messages per request
    # (size, window) cells of single sends through rocketq's auto_batch producer (RocketMQ 5's autoBatch)
    auto_batch_cells: list[tuple[int, int]] = field(
        default_factory=lambda: [(128, 64), (1024, 64), (4096, 64), (1024, 256)]
    )
    seconds: float = 1.0  # closed-loop max-rate phase
    lat_seconds: float = 3.0  # open-loop latency phase (p99 from >= 30 samples even at W=1, tier A)
    lat_fraction: float = 0.5  # open-loop rate = this x the cell's max sustainable rate
    # max sustainable rate: fractions of the closed-loop max tried top down, each for sus_seconds
    sus_ladder: tuple[float, ...] = (0.9, 0.75, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
    sus_refine: bool = True  # one more step between the first rate that held and the one above it
    sus_seconds: float = 1.5
    sus_max_late_ms: float = 500.0  # a send that cannot start this late: the rate is not sustained
    sus_ack_p50_floor_us: int = 20_000
    sus_e2e_p50_floor_us: int = 100_000
    lat_curve: tuple[float, ...] = (0.1, 0.8)  # extra fractions, on the 1 KiB W=64 cell only
    warmup_s: float = 0.2
    backlog_seconds: float = 1.5  # fill time of the backlog catch-up test (1 KiB, 64 in flight)
    recovery_seconds: float = 1.0  # fill time before kill -9 (tier A)
    reps: int = 3
    dd_mib: int = 512
    limit_seconds: float = 1.0
    systems: list[str] = field(default_factory=lambda: ["rocketq", "redis", "rabbitmq", "nats", "beanstalkd"])
    tiers: list[str] = field(default_factory=lambda: ["A", "B"])
    drop_caches: bool = True
    profile_seconds: float = 5.0  # py-spy on the rocketq broker after the repetitions (0: no profile)
    rotate_order: bool = True  # each repetition starts one system later (run())
    # cells beyond sizes x windows: a wider window, and large messages for the MB/s ceiling
    extra_cells: list[tuple[int, int]] = field(default_factory=lambda: [(1024, 256), (65536, 64)])
    # shapes (name, producers, consumer groups, consumers per group, in flight per producer), 1 KiB,
    # one topic with shape_queues queues, consumers live while the producers run closed loop
    shapes: list[tuple[str, int, int, int, int]] = field(
        default_factory=lambda: [("4p4c", 4, 1, 4, 16), ("fanout2", 1, 2, 1, 64)]
    )
    shape_size: int = 1024
    shape_queues: int = 8
    shape_seconds: float = 2.0


def smoke_plan() -> Plan:
    return Plan(
        sizes=[1024],
        windows=[1, 64],
        batch=8,
        auto_batch_cells=[(1024, 64)],
        seconds=0.25,
        lat_seconds=0.25,
        sus_ladder=(0.5, 0.2),
        sus_refine=False,
        sus_seconds=0.25,
        warmup_s=0.05,
        backlog_seconds=0.25,
        recovery_seconds=0.2,
        reps=1,
        extra_cells=[(65536, 64)],
        shape_seconds=0.25,
        dd_mib=16,
        limit_seconds=0.2,
        drop_caches=False,
        profile_seconds=0,
    )


class WorkerError(RuntimeError):
    pass


class Worker:
    """A loadgen.py process (one role; ``clients`` connections of it), pinned; JSON lines both ways."""

    def __init__(
        self, system: str, role: str, args: dict[str, Any] | None, env: dict[str, str], clients: int = 1
    ) -> None:
        self.system, self.role = system, role
        self.proc = subprocess.Popen(
            [*taskset(CLIENT_CPU), sys.executable, os.path.join(HERE, "loadgen.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.err: list[bytes] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._drain_err, daemon=True).start()
        if args is not None:
            self.call({"op": "init", "system": system, "role": role, "args": args, "clients": clients}, 90)

    def _pump(self, f: Any, q: queue.Queue[bytes]) -> None:
        for line in f:
            q.put(line)
        q.put(b"")

    def _drain_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)
            del self.err[:-30]

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout_s: float) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise WorkerError(f"{self.system} {self.role}: no answer in {timeout_s:.0f} s") from None
        if not line:
            raise WorkerError(f"{self.system} {self.role} exited: {b''.join(self.err).decode()[-800:]}")
        r = json.loads(line)
        if "error" in r:
            raise WorkerError(f"{self.system} {self.role}: {r['error']}\n{r.get('trace', '')}")
        return r

    def call(self, cmd: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
        self.send(cmd)
        return self.recv(timeout_s)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.poll() is None:
                self.call({"op": "exit"}, 15)
        with contextlib.suppress(Exception):
            self.proc.wait(5)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (REPO, os.path.join(REPO, "src"), env.get("PYTHONPATH")) if p
    )
    return env


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        return False


class Runner:
    def __init__(self, plan: Plan, scratch: str, log: Any) -> None:
        self.plan = plan
        self.scratch = scratch
        self.log = log
        self.env = worker_env()
        self._seq = 0

    def name(self, prefix: str) -> str:
        self._seq += 1
        return f"{prefix}{self._seq}"

    def say(self, msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=self.log, flush=True)

    # -- one (system, tier) in one repetition ---------------------------------------------------------
    def run_system(self, system: str, tier: str, rep: int) -> dict[str, Any]:
        mod = importlib.import_module(f".{SYSTEM_MODULES[system]}", __package__)
        root = tempfile.mkdtemp(prefix=f"{system}-{tier}-", dir=self.scratch)
        server = mod.SERVER(tier, root, SERVER_CPU)
        out: dict[str, Any] = {"system": system, "tier": tier, "rep": rep, "cells": []}
        workers: list[Worker] = []
        ticks0 = cpu_ticks()
        try:
            out["start_s"] = server.start()
            args = server.client_args()
            prod = Worker(system, "producer", args, self.env)
            workers.append(prod)
            cons = Worker(system, "consumer", args, self.env)
            workers.append(cons)
            cells: list[tuple[int, int, int]] = [
                (s, w, 0) for s in self.plan.sizes for w in self.plan.windows
            ]
            if mod.CLIENT.supports_batch and self.plan.batch:
                mid = 1024 if 1024 in self.plan.sizes else self.plan.sizes[0]
                cells += [(mid, w, self.plan.batch) for w in self.plan.windows]
            if mod.CLIENT.supports_auto_batch:
                cells += [(s, w, AUTO_BATCH) for s, w in self.plan.auto_batch_cells]
            noise_cell = (1024 if 1024 in self.plan.sizes else self.plan.sizes[0], max(self.plan.windows), 0)
            cells.append(noise_cell)  # the same config twice: the noise floor
            repeat_at = len(cells) - 1
            # After the noise pair: the 64 KiB cell writes hundreds of MB (Redis rewrites its AOF after it,
            # the page cache fills with dirty pages), which would land in the grid cells and the pair.
            cells += [(s, w, 0) for s, w in self.plan.extra_cells if (s, w, 0) not in cells]
            for i, (size, window, batch) in enumerate(cells):
                repeat = i == repeat_at
                curve = not repeat and (size, window, batch) == noise_cell
                cell = self.run_cell(server, prod, cons, size, window, batch, curve)
                cell["repeat"] = repeat
                out["cells"].append(cell)
                self.say(
                    f"{system}/{tier} rep{rep} {size}B w{window}{batch_label(batch)}: "
                    f"pub {cell['pub_rate']:.0f}/s cons {cell.get('cons_rate') or 0:.0f}/s "
                    f"ack p50 {cell.get('lat_ack', {}).get('p50', '-')} us "
                    f"e2e p50 {cell.get('lat_e2e', {}).get('p50', '-')} us"
                    f"{steal_note(cell['steal_pub'])}"
                )
            out["backlog"] = self.run_backlog(server, prod, cons)
            out["shapes"] = {}
            for shape in self.plan.shapes:
                out["shapes"][shape[0]] = sh = self.run_shape(system, server, shape)
                self.say(
                    f"{system}/{tier} rep{rep} shape {shape[0]}: pub {sh['pub_rate']:.0f}/s delivered "
                    f"{sh['delivered_rate'] or 0:.0f}/s e2e p50 {sh['e2e'].get('p50', '-')} us"
                )
            out["rss_bytes"] = server.rss_bytes()
            if tier == "A":
                out["recovery"] = self.run_recovery(system, server, prod, cons, workers)
            out["server_log"] = server.log_tail(3000)
            out["steal"] = steal_since(ticks0)
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            out["server_log"] = server.log_tail(1500)
            self.say(f"{system}/{tier} rep{rep} FAILED: {out['error']}")
        finally:
            for w in workers:
                w.close()
            server.cleanup()
        return out

    def run_profile(self, tier: str) -> dict[str, Any]:
        """py-spy on the rocketq broker during a closed-loop 1 KiB, 64-in-flight publish run (a separate pass,
        so the sampling does not perturb the measured repetitions)."""
        from . import profile
        from .sys_rocketq import RocketqServer

        if profile.py_spy() is None:
            return {"error": "py-spy not installed"}
        root = tempfile.mkdtemp(prefix="profile-", dir=self.scratch)
        server = RocketqServer(tier, root, SERVER_CPU)
        prod = None
        secs = self.plan.profile_seconds
        try:
            server.start()
            prod = Worker("rocketq", "producer", server.client_args(), self.env)
            prod.call({"op": "prepare", "topics": ["profile"]}, 90)
            out = os.path.join(root, "py-spy.txt")
            spy = profile.start(server.proc.pid, secs, out)
            cpu0 = server.cpu_seconds()
            cmd = {"op": "produce", "topic": "profile", "size": 1024, "window": 64, "seconds": secs}
            r = prod.call(cmd, secs + 120)
            cpu1 = server.cpu_seconds()
            if spy is not None:
                spy.wait(secs + 30)
            folded = profile.fold(out) if os.path.exists(out) else {"error": "py-spy wrote nothing"}
            folded.update(
                rate=r["n"] / r["elapsed_s"] if r["elapsed_s"] > 0 else 0.0,
                cpu_us=(cpu1 - cpu0) / r["n"] * 1e6 if r["n"] else None,
            )
            return folded
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        finally:
            if prod is not None:
                prod.close()
            server.cleanup()

    def run_ceiling(self) -> dict[str, Any]:
        """The load generator against a null broker (acks at once, stores nothing): the client model's own
        publish ceiling per size and window, which bounds every system here."""
        from .sys_null import NullServer

        root = tempfile.mkdtemp(prefix="null-", dir=self.scratch)
        server = NullServer("-", root, SERVER_CPU)
        out: dict[str, Any] = {}
        lat: dict[str, Any] = {}
        prod = None
        try:
            server.start()
            prod = Worker("null", "producer", server.client_args(), self.env)
            grid = [(s, w) for s in self.plan.sizes for w in self.plan.windows]
            for size, w in grid + [c for c in self.plan.extra_cells if c not in grid]:
                cmd = {
                    "op": "produce",
                    "topic": "null",
                    "size": size,
                    "window": w,
                    "seconds": self.plan.seconds,
                    "warmup_s": self.plan.warmup_s,
                }
                r = prod.call(cmd, self.plan.seconds + 60)
                rate = r["n"] / r["elapsed_s"] if r["elapsed_s"] > 0 else 0.0
                out[f"{size}/{w}"] = rate
                # the generator's own latency floor at the same fraction as the systems' latency runs
                cmd = {
                    "op": "produce",
                    "topic": "null",
                    "size": size,
                    "window": w,
                    "seconds": self.plan.lat_seconds,
                    "rate": max(1.0, rate * self.plan.lat_fraction),
                }
                lat[f"{size}/{w}"] = prod.call(cmd, self.plan.lat_seconds + 60)["ack"]
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"[:500]
        finally:
            if prod is not None:
                prod.close()
            server.cleanup()
        return {"rate": out, "latency": lat}

    def run_cell(
        self, server: Any, prod: Worker, cons: Worker, size: int, window: int, batch: int, curve: bool = False
    ) -> dict[str, Any]:
        p = self.plan
        t_thr = self.name("thr")
        prod.call({"op": "prepare", "topics": [t_thr]}, 90)
        cell: dict[str, Any] = {"size": size, "window": window, "batch": batch}
        # 1. max publish rate (closed loop), server CPU and bytes written during it
        cpu0, wb0, ticks0 = server.cpu_seconds(), server.write_bytes(), cpu_ticks()
        r = prod.call(
            {
                "op": "produce",
                "topic": t_thr,
                "size": size,
                "window": window,
                "batch": batch,
                "seconds": p.seconds,
                "warmup_s": p.warmup_s,
            },
            p.seconds + p.warmup_s + 120,
        )
        cpu1, wb1 = server.cpu_seconds(), server.write_bytes()
        cell["steal_pub"] = steal_since(ticks0)
        n = r["n"]
        cell.update(
            pub_n=n,
            pub_errors=r["errors"],
            pub_first_error=r["first_error"],
            pub_rate=n / r["elapsed_s"] if r["elapsed_s"] > 0 else 0.0,
            ack_closed=r["ack"],
            cpu_pub_us=(cpu1 - cpu0) / n * 1e6 if n else None,
            client_pub_us=r.get("client_cpu_us"),
            write_bytes_per_msg=(wb1 - wb0) / n if n else None,
        )
        cell["pub_mb_s"] = cell["pub_rate"] * size / 1e6
        # 2. drain that backlog with a fresh consumer (page cache warm)
        if n:
            cons.call({"op": "subscribe", "topic": t_thr, "group": self.name("g")}, 90)
            d = cons.call({"op": "drain", "topic": t_thr, "expect": n, "timeout_s": 30}, 90)
            if d.get("stored") is not None:
                cell["cons_short_stored"] = d["stored"]
            cpu2 = server.cpu_seconds()
            cell.update(
                cons_n=d["n"],
                cons_rate=d["rate"],
                cons_first_s=d["first_s"],
                client_cons_us=d.get("client_cpu_us"),
                cpu_cons_us=(cpu2 - cpu1) / max(1, d["n"]) * 1e6,
            )
        # 3. the max sustainable rate: open loop with a live consumer, top down from the closed-loop max
        if batch <= 0 and n:  # single sends (auto-batched ones too: each is acknowledged on its own)
            cell.update(self.find_sustainable(prod, cons, size, window, cell["pub_rate"], r["ack"], batch))
        # 4. open-loop latency at fractions of the sustainable rate (the closed-loop max if none was found)
        if batch <= 0 and n:
            base = cell.get("sus_rate") or cell["pub_rate"]
            cell["lat_base"] = "sustained" if cell.get("sus_rate") else "closed"
            rate = max(1.0, base * p.lat_fraction)
            lat = self.open_run(prod, cons, size, window, rate, p.lat_seconds, batch=batch)
            if lat["short_stored"] is not None:
                cell["lat_short_stored"] = lat["short_stored"]
            cell.update(
                lat_rate=lat["rate"],
                lat_n=lat["n"],
                lat_errors=lat["errors"],
                lat_ack=lat["ack"],
                lat_e2e=lat["e2e"],
                lat_consumed=lat["consumed"],
            )
            # latency against load: more fractions, on one cell per system/tier
            for frac in p.lat_curve if curve else ():
                pt = self.open_run(
                    prod, cons, size, window, max(1.0, base * frac), p.lat_seconds, batch=batch
                )
                cell.setdefault("lat_curve", {})[str(frac)] = {
                    k: pt[k] for k in ("rate", "n", "ack", "e2e", "consumed")
                }
        return cell

    def open_run(
        self,
        prod: Worker,
        cons: Worker,
        size: int,
        window: int,
        rate: float,
        seconds: float,
        max_late_ms: float | None = None,
        batch: int = 0,
    ) -> dict[str, Any]:
        """Publish at a fixed rate to a new topic while a fresh consumer group receives it (batch: 0, or
        AUTO_BATCH for single sends through the client's own batching)."""
        t = self.name("open")
        prod.call({"op": "prepare", "topics": [t]}, 90)
        cons.call({"op": "subscribe", "topic": t, "group": self.name("g")}, 90)
        cmd = {"op": "produce", "topic": t, "size": size, "window": window, "rate": rate, "seconds": seconds}
        if batch:
            cmd["batch"] = batch
        if max_late_ms:
            cmd["max_late_ms"] = max_late_ms
        lr = prod.call(cmd, seconds + 120)
        d = cons.call({"op": "drain", "topic": t, "expect": lr["n"], "timeout_s": 30}, 90)
        return {
            "rate": rate,
            "n": lr["n"],
            "intended": lr.get("intended", lr["n"]),
            "behind": bool(lr.get("behind")),
            "errors": lr["errors"],
            "ack": lr["ack"],
            "e2e": d["e2e"],
            "consumed": d["n"],
            "short_stored": d.get("stored"),
        }

    def find_sustainable(
        self,
        prod: Worker,
        cons: Worker,
        size: int,
        window: int,
        top: float,
        closed_ack: dict[str, Any],
        batch: int = 0,
    ) -> dict[str, Any]:
        """The highest rate, down a ladder of fractions of the closed-loop max (then once between the first
        that held and the one above it), that a system keeps up with: every send started on time, every
        one acknowledged and consumed, and the median ack and end-to-end latency stay bounded. A rate above
        capacity makes the queue, and so the median latency, grow through the run; a burst absorbed in
        memory and written later does not count as sustained."""
        p = self.plan
        # bounds from the system's own closed loop: with W in flight its ack p50 is about W / capacity
        ack_bound = max(p.sus_ack_p50_floor_us, 2 * (closed_ack.get("p50") or 0))
        e2e_bound = max(p.sus_e2e_p50_floor_us, 2 * ack_bound)

        def step(frac: float, refine: bool = False) -> dict[str, Any]:
            rate = max(1.0, top * frac)
            s = self.open_run(prod, cons, size, window, rate, p.sus_seconds, p.sus_max_late_ms, batch)
            s["fraction"], s["refine"] = frac, refine
            s["ok"] = (
                not s["behind"]
                and s["errors"] == 0
                and s["n"] >= s["intended"]
                and s["consumed"] >= s["n"]
                and s["ack"].get("p50", float("inf")) <= ack_bound
                and s["e2e"].get("p50", float("inf")) <= e2e_bound
            )
            s.pop("short_stored", None)
            return s

        steps: list[dict[str, Any]] = []
        above: float | None = None
        for frac in p.sus_ladder:
            steps.append(step(frac))
            if steps[-1]["ok"]:
                if above is not None and p.sus_refine:
                    steps.append(step((frac * above) ** 0.5, refine=True))
                break
            above = frac
        held = [s["rate"] for s in steps if s["ok"]]
        return {"sus_rate": max(held) if held else None, "sus_steps": steps}

    def run_backlog(self, server: Any, prod: Worker, cons: Worker) -> dict[str, Any]:
        """Stop consumers, fill, drop the page cache, drain while producing at 10 % of the fill rate."""
        p = self.plan
        size = 1024
        topic = self.name("backlog")
        prod.call({"op": "prepare", "topics": [topic]}, 90)
        r = prod.call(
            {"op": "produce", "topic": topic, "size": size, "window": 64, "seconds": p.backlog_seconds},
            p.backlog_seconds + 120,
        )
        n = r["n"]
        fill_rate = n / r["elapsed_s"] if r["elapsed_s"] > 0 else 0.0
        dropped = drop_caches() if p.drop_caches else False
        cons.call({"op": "subscribe", "topic": topic, "group": self.name("g")}, 90)
        prod.send(
            {
                "op": "produce",
                "topic": topic,
                "size": size,
                "window": 64,
                "rate": max(1.0, fill_rate * 0.1),
                "seconds": p.backlog_seconds,
            }
        )
        d = cons.call({"op": "drain", "topic": topic, "expect": n, "timeout_s": 60}, 120)
        prod.recv(p.backlog_seconds + 120)
        return {
            "n": n,
            "fill_rate": fill_rate,
            "drain_n": d["n"],
            "drain_rate": d["rate"],
            "catchup_s": (d["first_s"] or 0) + d["span_s"] if d["n"] else None,
            "caches_dropped": dropped,
        }

    def run_shape(self, system: str, server: Any, shape: tuple[str, int, int, int, int]) -> dict[str, Any]:
        """Several producers (or consumer groups) on one topic: consumers subscribed first, then the
        producers publish closed loop (each with its own window); every group must receive every message.
        Fresh worker processes: one holding all producers, one holding all consumers (one connection each)."""
        p = self.plan
        _name, producers, groups, per_group, window = shape
        topic = self.name("shape")
        gnames = [self.name("g") for _ in range(groups)]
        members = [g for g in gnames for _ in range(per_group)]
        fanout = groups > 1
        args = server.client_args()
        prod = cons = None
        try:
            prod = Worker(system, "producer", args, self.env, clients=producers)
            cons = Worker(system, "consumer", args, self.env, clients=len(members))
            prep = {"op": "prepare", "topics": [topic], "queues": p.shape_queues}
            prod.call({**prep, "groups": gnames if fanout else None}, 90)
            sub = {"op": "subscribe", "topic": topic, "groups": members, "queues": p.shape_queues}
            cons.call({**sub, "fanout": fanout}, 120)
            cpu0 = server.cpu_seconds()
            r = prod.call(
                {
                    "op": "produce",
                    "topic": topic,
                    "size": p.shape_size,
                    "window": window,
                    "seconds": p.shape_seconds,
                    "warmup_s": p.warmup_s,
                },
                p.shape_seconds + p.warmup_s + 120,
            )
            n = r["n"]
            d = cons.call({"op": "drain", "topic": topic, "expect": n * groups, "timeout_s": 60}, 120)
            cpu1 = server.cpu_seconds()
            # deliveries per second from the producers' first measured publish to the last delivery
            span = (d["t_last"] - r["t_start"]) / 1e9 if d["n"] else 0.0
            return {
                "producers": producers,
                "groups": groups,
                "consumers": len(members),
                "window": window,
                "pub_n": n,
                "pub_errors": r["errors"],
                "pub_rate": n / r["elapsed_s"] if r["elapsed_s"] > 0 else 0.0,
                "ack": r["ack"],
                "delivered": d["n"],
                "delivered_rate": d["n"] / span if span > 0 else None,
                "e2e": d["e2e"],
                "stored_when_short": d.get("stored"),
                "cpu_us": (cpu1 - cpu0) / n * 1e6 if n else None,
            }
        finally:
            for w in (prod, cons):
                if w is not None:
                    w.close()

    def run_recovery(
        self, system: str, server: Any, prod: Worker, cons: Worker, workers: list[Worker]
    ) -> dict:
        """Fill, kill -9 the server tree, restart on the same data: time to the first acknowledged publish
        and to having consumed every acknowledged message."""
        p = self.plan
        topic = self.name("recov")
        prod.call({"op": "prepare", "topics": [topic]}, 90)
        r = prod.call(
            {"op": "produce", "topic": topic, "size": 1024, "window": 64, "seconds": p.recovery_seconds},
            p.recovery_seconds + 120,
        )
        n = r["n"]
        probe = Worker(system, "producer", None, self.env)  # connects only after the restart
        workers.append(probe)
        args = server.client_args()
        server.kill9()
        t0 = now_ns()
        port_s = server.start()
        fp = probe.call(
            {"op": "first_publish", "system": system, "args": args, "topic": topic, "timeout_s": 60}, 120
        )
        fresh = Worker(system, "consumer", server.client_args(), self.env)
        workers.append(fresh)
        fresh.call({"op": "subscribe", "topic": topic, "group": self.name("g")}, 90)
        d = fresh.call({"op": "drain", "topic": topic, "expect": n, "timeout_s": 60}, 120)
        return {
            "acked": n,
            "restart_port_s": port_s,
            "first_publish_s": (fp["t"] - t0) / 1e9 if fp.get("ok") else None,
            "consumed": d["n"],
            "lost": max(0, n - d["n"]),
            "stored_when_short": d.get(
                "stored"
            ),  # broker's count (+1 probe message) when the consumer fell short
            "first_s": d.get("first_s"),
            "drain_s": (d["t_last"] - t0) / 1e9 if d["n"] else None,
        }


def source_revision() -> str:
    """Which rocketq is measured: the git commit of the tree the harness runs from (+dirty), or
    $ROCKETQ_BENCH_REV when run from an exported snapshot."""
    if os.environ.get("ROCKETQ_BENCH_REV"):
        return os.environ["ROCKETQ_BENCH_REV"]
    try:
        rev = (
            subprocess.run(
                ["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                capture_output=True,
                timeout=10,
                check=True,
            )
            .stdout.decode()
            .strip()
        )
        dirty = subprocess.run(
            ["git", "-C", REPO, "status", "--porcelain", "--", "src", "bench/peers"],
            capture_output=True,
            timeout=10,
        ).stdout.strip()
        return rev + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        # the interpreter build matters as much as its version (scripts/pick_python.sh)
        "python_exe": os.path.realpath(sys.executable),
        "kernel": platform.release(),
        "arch": platform.machine(),
    }
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        facts["mem_gib"] = round(int(f.readline().split()[1]) / 1048576, 1)
    facts["loadavg_start"] = os.getloadavg()
    versions: dict[str, str] = {}
    for name, cmd in {
        "redis-server": ["redis-server", "--version"],
        "rabbitmq-server": ["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"],
        "erlang": ["dpkg-query", "-W", "-f=${Version}", "erlang-base"],
        "nats-server": [os.path.join(os.path.dirname(sys.executable), "nats-server"), "--version"],
        "beanstalkd": ["beanstalkd", "-v"],
    }.items():
        with contextlib.suppress(Exception):
            versions[name] = subprocess.run(cmd, capture_output=True, timeout=10).stdout.decode().strip()[:80]
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        for pkg in ("rocketq", "redis", "hiredis", "aio-pika", "nats-py", "uvloop"):
            with contextlib.suppress(Exception):
                versions[pkg] = version(pkg)
    facts["versions"] = versions
    facts["rocketq_source"] = f"{os.path.join(REPO, 'src')} @ {source_revision()}"
    return facts


def steal_since(before: dict[int, tuple[int, int]]) -> dict[str, float | None]:
    """CPU steal since ``before`` (cpu_ticks()) on the servers' CPU and on the load generator's."""
    after = cpu_ticks()
    return {
        "server": steal_share(before, after, SERVER_CPU),
        "client": steal_share(before, after, CLIENT_CPU),
    }


def steal_note(steal: dict[str, float | None]) -> str:
    """ ", steal 12 % / 3 %" (server CPU / load generator CPU) for the log, or nothing if unknown."""
    srv, cli = steal.get("server"), steal.get("client")
    return "" if srv is None or cli is None else f", steal {srv:.0%} / {cli:.0%}"


def system_order(plan: Plan, rep: int) -> list[str]:
    """The systems in the order repetition ``rep`` runs them: rotated by one per repetition (rotate_order),
    so that what a system inherits from the one run before it (page cache, memory freed moments ago, which
    this VM hands out ~10x cheaper than fresh memory) changes hands."""
    systems = list(plan.systems)
    k = rep % len(systems) if systems and plan.rotate_order else 0
    return systems[k:] + systems[:k]


def run(
    plan: Plan, scratch: str, log: Any = sys.stderr, skip: dict[str, str] | None = None
) -> dict[str, Any]:
    runner = Runner(plan, scratch, log)
    skip = dict(skip or {})
    results: dict[str, Any] = {"plan": asdict(plan), "machine": machine_facts(), "skipped": skip, "runs": []}
    t0 = time.monotonic()
    run_ticks = cpu_ticks()
    runner.say("machine limits")
    from .limits import measure

    results["limits"] = measure(scratch, plan.sizes, plan.dd_mib, plan.limit_seconds, SERVER_CPU, CLIENT_CPU)
    results["limits"]["steal"] = steal_since(run_ticks)
    runner.say(f"limits: {json.dumps(results['limits'])}")
    results["ceiling"] = runner.run_ceiling()
    runner.say(f"load generator ceiling (null broker): {json.dumps(results['ceiling'])}")
    for rep in range(plan.reps):
        for system in system_order(plan, rep):
            if system in skip:
                continue
            mod = importlib.import_module(f".{SYSTEM_MODULES[system]}", __package__)
            for tier in plan.tiers:
                if tier not in mod.SERVER.tiers:
                    continue
                r = runner.run_system(system, tier, rep)
                if "error" in r and system != "rocketq":
                    # a peer is a reference point, not the system under test: one retry absorbs its own
                    # hiccups (reported); rocketq gets no second chance
                    runner.say(f"{system}/{tier} rep{rep}: retrying once")
                    first = r["error"]
                    r = runner.run_system(system, tier, rep)
                    r["retried_after"] = first
                results["runs"].append(r)
    if plan.profile_seconds > 0 and "rocketq" in plan.systems:
        results["profiles"] = {}
        for tier in plan.tiers:
            runner.say(f"profiling the rocketq broker, tier {tier}")
            results["profiles"][tier] = runner.run_profile(tier)
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["machine"]["steal"] = steal_since(run_ticks)
    results["elapsed_s"] = time.monotonic() - t0
    results["finished_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rocketq bench peers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny counts, every system once (CI)")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3)")
    ap.add_argument("--out", default=None, help="markdown file whose '## Peers' section is (re)written")
    ap.add_argument("--full-out", default=None, help="markdown file for every table of the run")
    ap.add_argument("--json", default=None, help="write the raw results here")
    ap.add_argument("--from-json", default=None, help="only render --out from earlier raw results")
    ap.add_argument("--systems", default=None, help="comma list (rocketq,redis,rabbitmq,nats,beanstalkd)")
    ap.add_argument("--tiers", default=None, help="comma list (A,B)")
    ap.add_argument("--sizes", default=None, help="comma list of message sizes")
    ap.add_argument("--seconds", type=float, default=None, help="length of each measured phase")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get / pip install missing peers")
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    from . import report

    if a.from_json:
        with open(a.from_json) as f:
            results = json.load(f)
    else:
        plan = smoke_plan() if a.smoke else Plan()
        if a.reps is not None:
            plan.reps = a.reps
        if a.systems:
            plan.systems = a.systems.split(",")
        if a.tiers:
            plan.tiers = a.tiers.split(",")
        if a.sizes:
            plan.sizes = [int(x) for x in a.sizes.split(",")]
        if a.seconds:
            plan.seconds = plan.lat_seconds = a.seconds
        # every process (servers too) imports rocketq from the tree this harness belongs to
        os.environ["PYTHONPATH"] = worker_env()["PYTHONPATH"]
        problems = {} if a.no_install else ensure_all()
        for pkg, why in problems.items():
            print(f"install: {pkg}: {why}", file=sys.stderr)
        skip = unavailable_systems(problems)
        if "rocketq" in skip:
            print(f"cannot run: {skip['rocketq']}", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(
            prefix="rocketq-peers-", dir=os.environ.get("ROCKETQ_BENCH_DIR")
        ) as d:
            results = run(plan, d, sys.stderr, skip)
        results["command"] = a.command or "rocketq bench peers " + " ".join(argv or sys.argv[1:])
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)
    text = report.render(
        results, os.path.join(os.path.dirname(os.path.abspath(a.out)), "img") if a.out else None
    )
    if a.full_out:
        with open(a.full_out, "w") as f:
            f.write(report.render(results, None, detail=True))
        print(f"wrote every table of the run to {a.full_out}", file=sys.stderr)
    if a.out:
        report.write_section(a.out, text)
        print(f"wrote the '## Peers' section of {a.out}", file=sys.stderr)
    else:
        print(text)
    failed = [f"{r['system']}/{r['tier']}: {r['error']}" for r in results["runs"] if "error" in r]
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
