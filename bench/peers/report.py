# ruff: noqa: E501 - report prose and markdown rows read better unwrapped
"""Turn the harness's raw results into the '## Peers' section of docs/benchmarks.md and its PNG plots."""

from __future__ import annotations

import os
import re
import statistics
from collections import defaultdict
from typing import Any

from .common import AUTO_BATCH

SYSTEMS = ["rocketq", "redis", "rabbitmq", "nats", "beanstalkd"]
LABEL = {
    "rocketq": "rocketq",
    "redis": "Redis Streams",
    "rabbitmq": "RabbitMQ",
    "nats": "NATS JetStream",
    "beanstalkd": "beanstalkd",
}
TIER_TEXT = {
    "A": "tier A (acknowledged after fsync): rocketq SYNC_FLUSH, Redis appendfsync always, RabbitMQ durable queue + "
    "persistent + publisher confirms, NATS sync_interval always, beanstalkd -f0",
    "B": "tier B (acknowledged from the page cache, bounded fsync window): rocketq ASYNC_FLUSH, Redis appendfsync "
    "everysec, NATS sync_interval 1s, beanstalkd -f 1000 (RabbitMQ has no tier B)",
}


def med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def mmm(xs: list[float | None], digits: int = 0) -> str:
    """median [min–max] (just the value with one repetition)."""
    v = [x for x in xs if x is not None]
    if not v:
        return "-"
    if len(v) == 1:
        return num(v[0], digits)
    return f"{num(statistics.median(v), digits)} [{num(min(v), digits)}–{num(max(v), digits)}]"


def us(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1000:.1f} ms" if x >= 10_000 else f"{x:,.0f} µs"


class Agg:
    """Cells of every repetition grouped by (system, tier) and (size, window, batch)."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.r = results
        self.cells: dict[tuple[str, str], dict[tuple[int, int, int], list[dict]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.repeats: dict[tuple[str, str], list[tuple[dict, dict]]] = defaultdict(list)
        self.runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for run in results["runs"]:
            key = (run["system"], run["tier"])
            self.runs[key].append(run)
            first: dict[tuple[int, int, int], dict] = {}
            for c in run.get("cells", []):
                ck = (c["size"], c["window"], c["batch"])
                if c.get("repeat"):
                    if ck in first:
                        self.repeats[key].append((first[ck], c))
                    continue
                first.setdefault(ck, c)
                self.cells[key][ck].append(c)

    def values(
        self, key: tuple[str, str], ck: tuple[int, int, int], field: str, sub: str | None = None
    ) -> list:
        out = []
        for c in self.cells.get(key, {}).get(ck, []):
            v = c.get(field)
            if sub is not None:
                v = (v or {}).get(sub)
            if v is not None:
                out.append(v)
        return out

    def median(
        self, key: tuple[str, str], ck: tuple[int, int, int], field: str, sub: str | None = None
    ) -> float | None:
        return med(self.values(key, ck, field, sub))

    def keys(self, tier: str) -> list[tuple[str, str]]:
        return [(s, tier) for s in SYSTEMS if (s, tier) in self.runs]


def grid(plan: dict[str, Any]) -> list[tuple[int, int]]:
    """The (size, window) cells of single sends: sizes x windows, then the plan's extra cells."""
    cells = [(s, w) for s in plan["sizes"] for w in plan["windows"]]
    return cells + [tuple(c) for c in plan.get("extra_cells", []) if tuple(c) not in cells]


def _shape_names(ag: Agg, tier: str) -> list[str]:
    names: list[str] = []
    for k in ag.keys(tier):
        for run in ag.runs[k]:
            names += [n for n in run.get("shapes", {}) if n not in names]
    return names


def _shape_values(ag: Agg, key: tuple[str, str], shape: str, field: str, sub: str | None = None) -> list:
    out = []
    for run in ag.runs.get(key, []):
        v = run.get("shapes", {}).get(shape, {}).get(field)
        if sub is not None:
            v = (v or {}).get(sub)
        if v is not None:
            out.append(v)
    return out


def _shape_median(ag: Agg, key: tuple[str, str], shape: str, field: str) -> float | None:
    return med(_shape_values(ag, key, shape, field))


def shapes_section(ag: Agg, plan: dict[str, Any]) -> list[str]:
    L: list[str] = []
    for tier in plan["tiers"]:
        keys = ag.keys(tier)
        names = _shape_names(ag, tier)
        if not names:
            continue
        L.append(
            f"### Shapes, tier {tier}: several producers or consumer groups on one topic "
            f"({plan.get('shape_size', 1024)} B, {plan.get('shape_queues', 8)} queues)"
        )
        L.append("")
        if tier == plan["tiers"][0]:
            L.append(
                "Consumers subscribe first (and, for rocketq, wait until the rebalance has split the queues), "
                f"then the producers publish closed loop for {plan.get('shape_seconds')} s, each with its own "
                "window; every group must receive every message. **4p4c**: 4 producers × 16 in flight, one group "
                "of 4 consumers; **fanout2**: 1 producer × 64 in flight, 2 groups of one consumer, each group "
                "receives every message. One process holds the producers and one the consumers (one connection "
                "each), both on the load generator's CPU. Delivered msg/s: deliveries summed over the groups, "
                "from the first measured publish to the last delivery (consumers that keep up deliver at the "
                "publish rate × groups); e2e latency is at the maximum rate, so it includes queueing. How each "
                "system forms a group: rocketq consumer groups (queues allocated among the members); Redis a "
                "consumer group (XREADGROUP, one XACK per batch) for the 4 members, XREAD per fan-out reader; "
                "NATS one durable pull consumer shared by the members (explicit ack of every message — "
                "AckPolicy.ALL would also ack what another member still holds), one durable per fan-out group; "
                "RabbitMQ one queue the members consume, a fanout exchange with one durable queue per group; "
                "beanstalkd one tube the members reserve from, one tube per fan-out group that the producer puts "
                "every message into (it has neither groups nor fan-out)."
            )
            L.append("")
        L.append(
            "| shape | system | pub msg/s | delivered msg/s | e2e p50 | e2e p99 | server CPU µs / published msg |"
        )
        L.append("|---|---|---|---|---|---|---|")
        for shape in names:
            for k in keys:
                if not _shape_values(ag, k, shape, "pub_rate"):
                    continue
                L.append(
                    f"| {shape} | {LABEL[k[0]]} | {mmm(_shape_values(ag, k, shape, 'pub_rate'))} | "
                    f"{mmm(_shape_values(ag, k, shape, 'delivered_rate'))} | "
                    f"{us(med(_shape_values(ag, k, shape, 'e2e', 'p50')))} | "
                    f"{us(med(_shape_values(ag, k, shape, 'e2e', 'p99')))} | "
                    f"{num(_shape_median(ag, k, shape, 'cpu_us'), 1)} |"
                )
            rq = ("rocketq", tier)
            peers = [k for k in keys if k[0] != "rocketq"]
            if rq in ag.runs and peers:
                best_pub = max((_shape_median(ag, k, shape, "pub_rate") or 0 for k in peers), default=0)
                best_del = max((_shape_median(ag, k, shape, "delivered_rate") or 0 for k in peers), default=0)
                L.append(
                    f"| {shape} | rocketq ÷ best peer | "
                    f"{_ratio(_shape_median(ag, rq, shape, 'pub_rate'), best_pub or None)} | "
                    f"{_ratio(_shape_median(ag, rq, shape, 'delivered_rate'), best_del or None)} | | | |"
                )
        L.append("")
    return L


def _auto_cells(ag: Agg, tier: str) -> list[tuple[int, int, int]]:
    return sorted(ck for ck in ag.cells.get(("rocketq", tier), {}) if ck[2] == AUTO_BATCH)


def auto_batch_headline(ag: Agg, plan: dict[str, Any], detail: bool = True) -> list[str]:
    """rocketq's single sends through its auto_batch producer ÷ each peer's single sends, same cell (the docs
    page: 1 KiB only)."""
    rows = []
    for tier in plan["tiers"]:
        for size, w, b in _auto_cells(ag, tier):
            if not detail and size != 1024:
                continue
            rq = ag.median(("rocketq", tier), (size, w, b), "pub_rate")
            cols = [_ratio(rq, ag.median((s, tier), (size, w, 0), "pub_rate")) for s in SYSTEMS[1:]]
            rows.append(f"| {tier} | {size} | {w} | " + " | ".join(cols) + " |")
    if not rows:
        return []
    return [
        "The same single sends with the rocketq producer's `auto_batch=True` (RocketMQ 5's autoBatch: the "
        "client groups the sends in flight into batch requests; each message is still acknowledged on its "
        "own, after the same durability step), rocketq ÷ each peer's single sends, publish msg/s, median. "
        "Off by default, as in RocketMQ; the table above is the default producer:",
        "",
        "| tier | size | in flight | " + " | ".join(f"÷ {LABEL[s]}" for s in SYSTEMS[1:]) + " |",
        "|---|---|---|" + "---|" * (len(SYSTEMS) - 1),
        *rows,
        "",
    ]


def auto_batch_table(ag: Agg, tier: str) -> list[str]:
    cells = _auto_cells(ag, tier)
    if not cells:
        return []
    k = ("rocketq", tier)
    peers = [p for p in ag.keys(tier) if p[0] != "rocketq"]
    out = [
        "",
        "rocketq single sends with `auto_batch=True` (W sends in flight, each acknowledged on its own; latency "
        "open loop at half the sustainable rate, as for the single sends):",
        "",
        "| size | W | pub msg/s | max sustainable msg/s | consume msg/s | ack p50 / p99 | ÷ default producer, "
        "same cell | ÷ best peer, same cell |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ck in cells:
        single = ag.median(k, (ck[0], ck[1], 0), "pub_rate")
        best = max((ag.median(p, (ck[0], ck[1], 0), "pub_rate") or 0 for p in peers), default=0) or None
        rate = ag.median(k, ck, "pub_rate")
        out.append(
            f"| {ck[0]} | {ck[1]} | {mmm(ag.values(k, ck, 'pub_rate'))} | {mmm(ag.values(k, ck, 'sus_rate'))} | "
            f"{mmm(ag.values(k, ck, 'cons_rate'))} | {us(ag.median(k, ck, 'lat_ack', 'p50'))} / "
            f"{us(ag.median(k, ck, 'lat_ack', 'p99'))} | {_ratio(rate, single)} | {_ratio(rate, best)} |"
        )
    return out


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:.3f}" if r < 0.1 else f"{r:.2f}"


def _secs(xs: list[float | None]) -> str:
    v = mmm(xs, 2)
    return v if v == "-" else v + " s"


def _lost(rc: list[dict]) -> str:
    """Acknowledged messages the fresh consumer did not get after kill -9, split by whether the broker still
    reported holding them (a consumer-side shortfall) or not (missing)."""
    if not rc:
        return "-"
    missing = held = 0
    for c in rc:
        if not c.get("lost"):
            continue
        stored = c.get("stored_when_short")
        if isinstance(stored, int) and stored >= c["acked"]:
            held += c["lost"]
        else:
            missing += c["lost"]
    if not missing and not held:
        return "0"
    parts = []
    if missing:
        parts.append(f"**{missing} missing**")
    if held:
        parts.append(f"{held} not consumed in 60 s but held by the broker")
    return ", ".join(parts)


def _shortfalls(results: dict[str, Any]) -> list[str]:
    out = []
    for r in results["runs"]:
        for c in r.get("cells", []):
            for got, want, stored, what in (
                (c.get("cons_n"), c.get("pub_n"), c.get("cons_short_stored"), "drain"),
                (c.get("lat_consumed"), c.get("lat_n"), c.get("lat_short_stored"), "latency run"),
            ):
                if got is not None and want and got < want:
                    out.append(
                        f"- {r['system']} tier {r['tier']} rep {r['rep']}, {c['size']} B W={c['window']}"
                        f"{' auto-batch' if c['batch'] == AUTO_BATCH else ' batch ' + str(c['batch']) if c['batch'] else ''} {what}: consumed {got} of {want} "
                        f"acknowledged within the timeout; broker reports {stored} stored"
                    )
    return out


def render(results: dict[str, Any], img_dir: str | None, detail: bool = False) -> str:
    """The '## Peers' section. Without ``detail`` (docs/benchmarks.md): the headline ratios, publish rates,
    latency at 1 KiB, resources and the limits that bound rocketq; with it, every table of the run."""
    ag = Agg(results)
    plan = results["plan"]
    m = results["machine"]
    lim = results["limits"]
    L: list[str] = ["## Peers", ""]
    L.append(
        f"Command: `{results.get('command', 'rocketq bench peers')}` — finished {results.get('finished_utc', '?')}, "
        f"{results.get('elapsed_s', 0) / 60:.1f} min."
    )
    L.append("")
    v = m.get("versions", {})
    L.append(
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), {m.get('mem_gib', '?')} GiB, Linux {m.get('kernel')}, "
        f"Python {m.get('python')}{f' ({exe})' if (exe := m.get('python_exe')) else ''} (broker and every load generator), rocketq from {m.get('rocketq_source', '?')}, load average {m['loadavg_start'][0]:.1f} at the start and "
        f"{m.get('loadavg_end', [0])[0]:.1f} at the end (a shared machine: absolute numbers are noise, the same-run "
        "ratios are the result). Servers pinned to CPU 1, the load generator processes (one producer, one consumer, "
        "asyncio + uvloop) to CPU 0, identically for every system; fresh data dir per server start."
    )
    L.append("")
    L.append(
        "Versions: "
        + ", ".join(f"{k} {val}" for k, val in v.items() if val)
        + ". Clients: rocketq.aio (PushConsumer: pullBatchSize and consumeMessageBatchMaxSize 256, the broker "
        "set to allow 256 messages / 1 MiB per pull — RocketMQ's defaults are 32 / 256 KiB), redis-py + "
        "hiredis (XADD / XREAD COUNT 512), aio-pika (confirms; consumer prefetch 256, ack every 32nd multiple=True), nats-py "
        "(js.publish; durable pull consumer, fetch 256, AckPolicy.ALL on the last of each batch), beanstalkd through "
        "an asyncio client of its text protocol in bench/peers/sys_beanstalkd.py (greenstalk, the spec's client, "
        "blocks; pipelined put, up to 256 pipelined reserves per round, deleted after the listener ran)."
    )
    L.append("")
    L.append(
        "Method: per repetition every system and tier in turn (interleaved"
        + (", the order of the systems rotating by one each repetition" if plan.get("rotate_order") else "")
        + f"; {plan['reps']} repetition(s), median "
        f"[min–max] shown). Per cell: {plan['warmup_s']} s warm-up, then {plan['seconds']} s closed loop with W "
        "publishes in flight (max publish rate); a fresh consumer then drains that backlog (consume rate, page cache "
        "warm); then the max sustainable rate: open loop with at most W in flight and a live consumer, "
        f"{plan.get('sus_seconds', '?')} s per step, down a ladder of fractions of the closed-loop max "
        f"({', '.join(f'{f:g}' for f in plan.get('sus_ladder', ()))}"
        + (", then once between the first that held and the one above it" if plan.get("sus_refine") else "")
        + "); a rate holds when every send started within "
        f"{plan.get('sus_max_late_ms', 0):.0f} ms of its schedule, every message was acknowledged and consumed, "
        f"and the median ack latency stayed ≤ max({plan.get('sus_ack_p50_floor_us', 0) / 1000:.0f} ms, 2 × the "
        f"closed loop's) and the median end-to-end ≤ max({plan.get('sus_e2e_p50_floor_us', 0) / 1000:.0f} ms, "
        "2 × that) — above capacity the queue, and with it the median, grows through the step, and a burst "
        "absorbed in memory does not count. Then "
        f"{plan['lat_seconds']} s open loop at {plan['lat_fraction']:.0%} of that sustainable rate with at "
        "most W in flight and a live consumer: latency is measured from each message's intended send time (stamped in "
        "the body, time.monotonic_ns) so stalls are charged to every message they delayed (no coordinated omission); "
        "HdrHistogram. Bodies are random bytes (no compression anywhere). CPU is utime+stime of the server's process "
        "tree from /proc during the phase; bytes written is /proc/PID/io write_bytes during the publish phase "
        "(storage writes the server caused, including fsync rewrites of partial pages)."
    )
    L.append("")
    for pkg, why in results.get("skipped", {}).items():
        L.append(f"- **{pkg} skipped**: {why}")
    failed = [r for r in results["runs"] if "error" in r]
    for r in failed:
        L.append(f"- **{r['system']} tier {r['tier']} rep {r['rep']} failed**: {r['error'][:300]}")
    retried = [r for r in results["runs"] if "retried_after" in r]
    for r in retried:
        L.append(
            f"- {r['system']} tier {r['tier']} rep {r['rep']} was run a second time (a peer's run is retried "
            f"once; rocketq's never): the first attempt failed with {r['retried_after'][:200]}"
        )
    if results.get("skipped") or failed or retried:
        L.append("")

    # -- machine limits --------------------------------------------------------------------------------
    L.append("### Machine limits (same run)")
    L.append("")
    L.append(
        f"- dd sequential write, bs=1M, conv=fdatasync ({lim['dd']['mib']} MiB): **{lim['dd']['mb_s']:,.0f} MB/s**"
    )
    L.append(
        "- Python append + fdatasync per message: "
        + ", ".join(f"{s} B {float(x):,.0f}/s" for s, x in lim["fsync_loop"].items())
    )
    L.append(
        f"- loopback TCP bulk (Python sendall 1 MiB, pinned like the brokers): **{lim['loopback_mb_s']:,.0f} MB/s**"
    )
    L.append(f"- 64-byte asyncio ping-pong, 1 in flight: **{lim['pingpong_rt_s']:,.0f} round trips/s**")
    ceil = (results.get("ceiling") or {}).get("rate") or {}
    clat = (results.get("ceiling") or {}).get("latency") or {}
    if ceil and "error" not in ceil:
        L.append(
            "- load generator ceiling (the same producer process against a null broker that acks every frame at "
            "once and stores nothing), publish msg/s: "
            + ", ".join(f"{k.split('/')[0]} B W={k.split('/')[1]} {v:,.0f}" for k, v in ceil.items())
        )
        L.append(
            f"- load generator latency floor (null broker, open loop at {plan['lat_fraction']:.0%} of that ceiling), "
            "ack p50 / p99 / p99.9: "
            + ", ".join(
                f"{k.split('/')[0]} B W={k.split('/')[1]} {us(v.get('p50'))} / {us(v.get('p99'))} / {us(v.get('p999'))}"
                for k, v in clat.items()
            )
        )
    elif ceil:
        L.append(f"- load generator ceiling: failed ({ceil['error']})")
    L.append("")

    # -- headline ratios ---------------------------------------------------------------------------------
    L.append("### Headline: rocketq ÷ each peer, same tier, same run (publish msg/s, median)")
    L.append("")
    L.append("| tier | size | in flight | " + " | ".join(f"÷ {LABEL[s]}" for s in SYSTEMS[1:]) + " |")
    L.append("|---|---|---|" + "---|" * (len(SYSTEMS) - 1))
    for tier in plan["tiers"]:
        if ("rocketq", tier) not in ag.runs:
            continue
        for size, w in grid(plan):
            rq = ag.median(("rocketq", tier), (size, w, 0), "pub_rate")
            cols = [_ratio(rq, ag.median((s, tier), (size, w, 0), "pub_rate")) for s in SYSTEMS[1:]]
            L.append(f"| {tier} | {size} | {w} | " + " | ".join(cols) + " |")
        for shape in _shape_names(ag, tier):
            rq = _shape_median(ag, ("rocketq", tier), shape, "delivered_rate")
            cols = [_ratio(rq, _shape_median(ag, (s, tier), shape, "delivered_rate")) for s in SYSTEMS[1:]]
            runs = ag.runs.get(("rocketq", tier), [])
            sh = next((r["shapes"][shape] for r in runs if shape in r.get("shapes", {})), {})
            flight = f"{sh.get('producers', '?')} × {sh.get('window', '?')}"
            L.append(f"| {tier} | {shape}: delivered msg/s | {flight} | " + " | ".join(cols) + " |")
    L.append("")
    L.extend(auto_batch_headline(ag, plan, detail))
    sus_rows = []
    for tier in plan["tiers"]:
        if ("rocketq", tier) not in ag.runs:
            continue
        for size, w in grid(plan):
            rq = ag.median(("rocketq", tier), (size, w, 0), "sus_rate")
            if rq is None and not any(ag.values(k, (size, w, 0), "sus_rate") for k in ag.keys(tier)):
                continue
            cols = [_ratio(rq, ag.median((s, tier), (size, w, 0), "sus_rate")) for s in SYSTEMS[1:]]
            sus_rows.append(f"| {tier} | {size} | {w} | " + " | ".join(cols) + " |")
    if sus_rows:
        L.append(
            "Max sustainable publish rate (open loop, live consumer; Method), rocketq ÷ each peer, median:"
        )
        L.append("")
        L.append("| tier | size | in flight | " + " | ".join(f"÷ {LABEL[s]}" for s in SYSTEMS[1:]) + " |")
        L.append("|---|---|---|" + "---|" * (len(SYSTEMS) - 1))
        L.extend(sus_rows)
        L.append("")

    # -- throughput tables -------------------------------------------------------------------------------
    for tier in plan["tiers"]:
        keys = ag.keys(tier)
        if not keys:
            continue
        L.append(f"### Throughput, {TIER_TEXT[tier]}")
        L.append("")
        peers = [k for k in keys if k[0] != "rocketq"]
        has_rq = ("rocketq", tier) in ag.runs
        fields = (
            ("Publish msg/s (closed loop, W in flight), median [min–max]", "pub_rate", 0),
            ("Publish MB/s of payload (median)", "pub_mb_s", 1),
            (
                "Max sustainable publish msg/s (open loop with a live consumer, see Method), median [min–max]",
                "sus_rate",
                0,
            ),
            (
                "Consume msg/s (a fresh consumer draining the backlog the publish phase left; page cache warm)",
                "cons_rate",
                0,
            ),
        )
        for title, field, digits in fields if detail else fields[:1]:
            L.append(title + ":")
            L.append("")
            extra = has_rq and peers and field != "pub_mb_s"
            L.append(
                "| size | W | "
                + " | ".join(LABEL[s] for s, _ in keys)
                + (" | rocketq ÷ best peer |" if extra else " |")
            )
            L.append("|---|---|" + "---|" * (len(keys) + (1 if extra else 0)))
            for size, w in grid(plan):
                ck = (size, w, 0)
                if digits:
                    cols = [num(ag.median(k, ck, field), digits) for k in keys]
                else:
                    cols = [mmm(ag.values(k, ck, field)) for k in keys]
                if field == "sus_rate":  # repetitions where not even the ladder's lowest rate held
                    for i, k in enumerate(keys):
                        miss = sum(
                            1
                            for c in ag.cells.get(k, {}).get(ck, [])
                            if c.get("sus_steps") and not c.get("sus_rate")
                        )
                        if miss:
                            cols[i] += f" (none held in {miss})"
                if extra:
                    best = max((ag.median(k, ck, field) or 0 for k in peers), default=0) or None
                    cols.append(_ratio(ag.median(("rocketq", tier), ck, field), best))
                L.append(f"| {size} | {w} | " + " | ".join(cols) + " |")
            L.append("")
        if detail and ("rocketq", tier) in ag.runs:
            bcells = sorted({ck for ck in ag.cells[("rocketq", tier)] if ck[2] > 0})
            if bcells:
                L.append("")
                L.append("rocketq batch send (one request carries B messages; W requests in flight):")
                L.append("")
                L.append("| size | B | W | pub msg/s | MB/s | consume msg/s | ÷ single sends, same W |")
                L.append("|---|---|---|---|---|---|---|")
                for ck in bcells:
                    k = ("rocketq", tier)
                    single = ag.median(k, (ck[0], ck[1], 0), "pub_rate")
                    L.append(
                        f"| {ck[0]} | {ck[2]} | {ck[1]} | {mmm(ag.values(k, ck, 'pub_rate'))} | "
                        f"{num(ag.median(k, ck, 'pub_mb_s'), 1)} | {mmm(ag.values(k, ck, 'cons_rate'))} | "
                        f"{_ratio(ag.median(k, ck, 'pub_rate'), single)} |"
                    )
            L.extend(auto_batch_table(ag, tier))
        L.append("")

    if detail:
        L.extend(shapes_section(ag, plan))

    # -- latency -------------------------------------------------------------------------------------------
    for tier in plan["tiers"]:
        keys = ag.keys(tier)
        if not keys:
            continue
        L.append(
            f"### Latency, tier {tier} (open loop at {plan['lat_fraction']:.0%} of each system's own max sustainable rate)"
        )
        L.append("")
        L.append(
            "Publish-ack and end-to-end (intended send → consumer callback) p50 / p99 / p99.9, medians over the "
            "repetitions. The offered rate differs per system (its own max sustainable rate; the closed-loop max where "
            "no step held), so compare shapes, not only values."
        )
        L.append("")
        L.append(
            "| size | W | system | offered msg/s | ack p50 | ack p99 | ack p99.9 | e2e p50 | e2e p99 | e2e p99.9 |"
        )
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for size, w in grid(plan):
            if not detail and (size != 1024 or w == 256):
                continue
            for k in keys:
                ck = (size, w, 0)
                row = [us(ag.median(k, ck, "lat_ack", p)) for p in ("p50", "p99", "p999")]
                row += [us(ag.median(k, ck, "lat_e2e", p)) for p in ("p50", "p99", "p999")]
                L.append(
                    f"| {size} | {w} | {LABEL[k[0]]} | {num(ag.median(k, ck, 'lat_rate'))} | "
                    + " | ".join(row)
                    + " |"
                )
        L.append("")

    # -- latency against load (one cell) ---------------------------------------------------------------
    mid_ = 1024 if 1024 in plan["sizes"] else plan["sizes"][0]
    wmax_ = max(plan["windows"])
    curve_rows = []
    for tier in plan["tiers"]:
        for k in ag.keys(tier):
            cells = ag.cells.get(k, {}).get((mid_, wmax_, 0), [])
            fracs = sorted(
                {float(f) for c in cells for f in (c.get("lat_curve") or {})} | {plan["lat_fraction"]}
            )
            for frac in fracs:
                if frac == plan["lat_fraction"]:
                    pts = [
                        {
                            "rate": c.get("lat_rate"),
                            "ack": c.get("lat_ack") or {},
                            "e2e": c.get("lat_e2e") or {},
                        }
                        for c in cells
                    ]
                else:
                    pts = [(c.get("lat_curve") or {}).get(str(frac)) for c in cells]
                    pts = [x for x in pts if x]
                if not pts:
                    continue

                def med_(key: str, p: str, pts: list[dict] = pts) -> float | None:
                    return med([x[key].get(p) for x in pts])

                curve_rows.append(
                    f"| {tier} | {LABEL[k[0]]} | {frac:.0%} | {num(med([x['rate'] for x in pts]))} | "
                    f"{us(med_('ack', 'p50'))} | {us(med_('ack', 'p99'))} | {us(med_('ack', 'p999'))} | "
                    f"{us(med_('e2e', 'p50'))} | {us(med_('e2e', 'p99'))} | {us(med_('e2e', 'p999'))} |"
                )
    if curve_rows and detail:
        L.append(
            f"### Latency against load ({mid_} B, at most {wmax_} in flight, fractions of each system's own sustainable rate)"
        )
        L.append("")
        L.append(
            "| tier | system | load | offered msg/s | ack p50 | ack p99 | ack p99.9 | e2e p50 | e2e p99 | e2e p99.9 |"
        )
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        L.extend(curve_rows)
        L.append("")

    # -- resources, backlog, recovery ----------------------------------------------------------------------
    L.append("### Server resources, backlog catch-up, recovery after kill -9")
    L.append("")
    mid = 1024 if 1024 in plan["sizes"] else plan["sizes"][0]
    wmax = max(plan["windows"])
    L.append(
        f"CPU-seconds per million messages (server tree, publish + consume phases, so not kernel workers: rocketq's tier-A fdatasync runs in one when submitted through native AIO; the load generator's producer and consumer processes beside it: each system's own Python client) and bytes written to storage "
        f"per message, {mid} B, W={wmax}; peak RSS (VmHWM of the server tree; rocketq's includes the mapped CommitLog pages it touched); backlog: fill at W=64 with 1 KiB for {plan['backlog_seconds']} s, "
        "drop the page cache (echo 1 > /proc/sys/vm/drop_caches), then a fresh consumer drains while a producer "
        "keeps publishing at 10 % of the fill rate; recovery (tier A): fill for "
        f"{plan['recovery_seconds']} s, SIGKILL the server tree, restart on the same data: seconds from the restart "
        "to the first acknowledged publish and to having consumed every acknowledged message."
    )
    L.append("")
    L.append(
        "| system | tier | CPU-s / M msgs (pub + cons) | client CPU-s / M (producer + consumer) | bytes written / msg | peak RSS MiB | backlog msgs | "
        "catch-up msg/s | catch-up s | restart → first publish ack | restart → all acked consumed | acked lost |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for tier in plan["tiers"]:
        for k in ag.keys(tier):
            ck = (mid, wmax, 0)
            ccpu = [
                a + b
                for a, b in zip(
                    ag.values(k, ck, "client_pub_us"), ag.values(k, ck, "client_cons_us"), strict=False
                )
            ]
            cpu = [
                a + b
                for a, b in zip(ag.values(k, ck, "cpu_pub_us"), ag.values(k, ck, "cpu_cons_us"), strict=False)
            ]
            runs = ag.runs[k]
            bl = [r["backlog"] for r in runs if "backlog" in r]
            rc = [r["recovery"] for r in runs if "recovery" in r]
            rss = [r.get("rss_bytes", 0) / 1048576 for r in runs if r.get("rss_bytes")]
            L.append(
                f"| {LABEL[k[0]]} | {tier} | {mmm(cpu, 1)} | {mmm(ccpu, 1)} | {mmm(ag.values(k, ck, 'write_bytes_per_msg'))} | "
                f"{mmm(rss)} | {mmm([b['n'] for b in bl])} | {mmm([b['drain_rate'] for b in bl])} | {mmm([b.get('catchup_s') for b in bl], 2)} | "
                f"{_secs([c['first_publish_s'] for c in rc])} | {_secs([c['drain_s'] for c in rc])} | "
                f"{_lost(rc)} |"
            )
    L.append("")

    short = _shortfalls(results)
    if short:
        L.append(
            "Consumers that fell short of the acknowledged count (never a pass/fail here, but worth a look):"
        )
        L.append("")
        L.extend(short)
        L.append("")

    # -- rocketq vs the machine ---------------------------------------------------------------------------
    L.append("### rocketq as a fraction of the limit that bounds it (medians)")
    L.append("")
    L.append("| figure | rocketq | limit | fraction |")
    L.append("|---|---|---|---|")
    pp = lim["pingpong_rt_s"]
    for tier in plan["tiers"]:
        k = ("rocketq", tier)
        if k not in ag.runs:
            continue
        for size in plan["sizes"]:
            if not detail and size != 1024 and len(plan["sizes"]) > 1:
                continue
            w1 = ag.median(k, (size, 1, 0), "pub_rate") if 1 in plan["windows"] else None
            if w1 is not None:
                if tier == "A":
                    fl = float(lim["fsync_loop"].get(str(size), 0)) or None
                    L.append(
                        f"| tier A {size} B, W=1 msg/s vs append+fdatasync loop | {num(w1)} | {num(fl)} | "
                        f"{_ratio(w1, fl)} |"
                    )
                L.append(
                    f"| tier {tier} {size} B, W=1 msg/s vs 64 B ping-pong | {num(w1)} | {num(pp)} | {_ratio(w1, pp)} |"
                )
            mb = ag.median(k, (size, wmax, 0), "pub_mb_s")
            bound, name = (
                (lim["dd"]["mb_s"], "dd fdatasync MB/s")
                if tier == "A"
                else (lim["loopback_mb_s"], "loopback MB/s")
            )
            for w in plan["windows"]:
                ceil_rate = ((results.get("ceiling") or {}).get("rate") or {}).get(f"{size}/{w}")
                rq = ag.median(k, (size, w, 0), "pub_rate")
                L.append(
                    f"| tier {tier} {size} B, W={w} msg/s vs the load generator's ceiling (null broker) | {num(rq)} | "
                    f"{num(ceil_rate)} | {_ratio(rq, ceil_rate)} |"
                )
            L.append(
                f"| tier {tier} {size} B, W={wmax} MB/s vs {name} | {num(mb, 1)} | {num(bound)} | {_ratio(mb, bound)} |"
            )
        for ck in sorted(c for c in ag.cells[k] if c[2] > 0 and detail):
            mb = ag.median(k, ck, "pub_mb_s")
            bound = lim["dd"]["mb_s"] if tier == "A" else lim["loopback_mb_s"]
            L.append(
                f"| tier {tier} batch {ck[2]}×{ck[0]} B, W={ck[1]} MB/s vs {'dd' if tier == 'A' else 'loopback'} "
                f"| {num(mb, 1)} | {num(bound)} | {_ratio(mb, bound)} |"
            )
    L.append("")

    if not detail:
        L.extend(BOUNDS)
        return _with_plots(L, ag, plan, img_dir)

    # -- noise ------------------------------------------------------------------------------------------------
    L.append("### Noise floor (the same config twice in a row on the same server)")
    L.append("")
    L.append(
        f"Each system/tier ran its {mid} B, W={wmax} cell a second time at the end of every repetition. "
        "|difference| ÷ mean of the two publish rates; a claimed margin must exceed it."
    )
    L.append("")
    L.append("| system | tier | pairs | median | max |")
    L.append("|---|---|---|---|---|")
    all_d: list[float] = []
    for tier in plan["tiers"]:
        for k in ag.keys(tier):
            ds = []
            for a, b in ag.repeats.get(k, []):
                x, y = a.get("pub_rate") or 0, b.get("pub_rate") or 0
                if x + y > 0:
                    ds.append(abs(x - y) / ((x + y) / 2))
            all_d += ds
            if ds:
                L.append(
                    f"| {LABEL[k[0]]} | {tier} | {len(ds)} | {statistics.median(ds):.0%} | {max(ds):.0%} |"
                )
    if all_d:
        L.append(f"| all | | {len(all_d)} | {statistics.median(all_d):.0%} | {max(all_d):.0%} |")
    L.append("")
    L.extend(steal_section(ag, results))
    profiles = results.get("profiles") or {}
    if profiles:
        L.append("### Where the rocketq broker's time goes (py-spy, 200 Hz, busy samples only)")
        L.append("")
        L.append(
            "A separate pass after the repetitions: 1 KiB, W=64 closed loop, py-spy record --threads on the broker "
            "pid; idle waits (Condition/Event.wait, sleeps) dropped. `Runner.run` self time is native code (uvloop, "
            "syscalls) and, on a loaded machine, time spent runnable but waiting for the CPU. Tier A's fdatasync: "
            "with native AIO (`syncFlushNativeAio`, the default) the loop submits it (`FdsyncContext.submit`) and a "
            "kernel worker runs it, outside the broker's process and so outside these samples and its CPU figures; "
            "with the thread fallback it shows as `MappedFile.flush` in the GroupCommitService thread."
        )
        L.append("")
        for tier, pr in profiles.items():
            if "error" in pr or not pr.get("busy_samples"):
                L.append(f"- tier {tier}: no profile ({pr.get('error', 'no busy samples')})")
                L.append("")
                continue
            L.append(
                f"Tier {tier}: {num(pr.get('rate'))} msg/s while sampled, broker CPU {num(pr.get('cpu_us'), 1)} µs "
                f"per message, {pr['busy_samples']} busy samples; threads: "
                + ", ".join(f"{t} {v} %" for t, v in pr["threads"])
            )
            L.append("")
            L.append("```")
            L.extend(f"{v:5.1f} % self  {f}" for f, v in pr["self"])
            L.extend(f"{v:5.1f} % incl  {f}" for f, v in pr["incl"])
            L.append("```")
            L.append("")
    return _with_plots(L, ag, plan, img_dir)


def _with_plots(L: list[str], ag: Agg, plan: dict[str, Any], img_dir: str | None) -> str:
    if img_dir:
        for n in plot(ag, plan, img_dir):
            L.append(f"![{n}](img/{n})")
            L.append("")
    return "\n".join(L).rstrip() + "\n"


BOUNDS = [
    "What bounds these figures (the table above gives each as a fraction of its limit):",
    "",
    "- **One send in flight** is a round trip: client encode, loopback, the broker's frame decode, store and "
    "reply, and the client's wake-up, all Python on asyncio. The 64-byte asyncio ping-pong of the same machine "
    "is the floor no Python server reaches; beanstalkd (C) comes closest to it. In tier A each acknowledgement "
    "also waits for one fdatasync (the append + fdatasync loop).",
    "- **64 or more in flight, tier A**: group commit shares each fdatasync among the sends in flight, so the "
    "broker's CPU per message (protocol decode, CommitLog append, ConsumeQueue and index dispatch) bounds the "
    "rate, far below the disk's MB/s.",
    "- **64 or more in flight, tier B**: CPU on both sides; the load generator's ceiling (the same producer "
    "against a broker that stores nothing) is the most any broker can show here.",
    "- **Absolute rates move with the host** (2 shared vCPUs, CPU steal): compare ratios within one run.",
    "",
]

STEADY_STEAL = 0.05  # a phase with less steal than this on both CPUs counts as steady


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def _pct_mmm(xs: list[float | None]) -> str:
    v = [x * 100 for x in xs if x is not None]
    if not v:
        return "-"
    return mmm(v, 1) + " %"


def _pair_steal(a: dict, b: dict) -> float | None:
    """The most steal either CPU saw in either cell of a noise pair (None if not recorded)."""
    xs = [c.get("steal_pub", {}).get(role) for c in (a, b) for role in ("server", "client")]
    return None if any(x is None for x in xs) else max(xs)  # type: ignore[type-var]


def steal_section(ag: Agg, results: dict[str, Any]) -> list[str]:
    """CPU steal per system and tier (results of runs made before it was recorded have none: no section)."""
    whole = results["machine"].get("steal")
    if not whole:
        return []
    L = ["### CPU steal (the host running other work on this VM's two vCPUs)", ""]
    lim = results["limits"].get("steal") or {}
    L.append(
        "Steal is the share of wall time a vCPU was ready to run but the hypervisor ran something else on the "
        "physical CPU behind it (/proc/stat, read before and after each phase). It takes time from whichever "
        "system runs at that moment and comes and goes, so it is the first suspect for the noise above: a cell "
        f"measured while the host was busy ran on part of a CPU. Whole run: server CPU {_pct(whole.get('server'))}, load generator "
        f"CPU {_pct(whole.get('client'))}; during the machine limits: {_pct(lim.get('server'))} and "
        f"{_pct(lim.get('client'))}."
    )
    L.append("")
    L.append("| system | tier | publish phases | server CPU, median [min–max] | load generator CPU |")
    L.append("|---|---|---|---|---|")
    for tier in results["plan"]["tiers"]:
        for k in ag.keys(tier):
            cells = [c for run in ag.runs[k] for c in run.get("cells", []) if c.get("steal_pub")]
            if cells:
                L.append(
                    f"| {LABEL[k[0]]} | {tier} | {len(cells)} | "
                    f"{_pct_mmm([c['steal_pub'].get('server') for c in cells])} | "
                    f"{_pct_mmm([c['steal_pub'].get('client') for c in cells])} |"
                )
    L.append("")
    steady: list[float] = []
    stolen: list[float] = []
    for pairs in ag.repeats.values():
        for a, b in pairs:
            x, y = a.get("pub_rate") or 0, b.get("pub_rate") or 0
            worst = _pair_steal(a, b)
            if x + y > 0 and worst is not None:
                (steady if worst < STEADY_STEAL else stolen).append(abs(x - y) / ((x + y) / 2))
    if steady or stolen:
        L.append(
            f"Noise pairs with under {STEADY_STEAL * 100:.0f} % steal on both CPUs in both cells: {len(steady)}"
            + (f", median difference {statistics.median(steady):.0%}" if steady else "")
            + f"; the others: {len(stolen)}"
            + (f", median difference {statistics.median(stolen):.0%}" if stolen else "")
            + "."
        )
        L.append("")
    return L


def plot(ag: Agg, plan: dict[str, Any], img_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(img_dir, exist_ok=True)
    tiers = [t for t in plan["tiers"] if ag.keys(t)]
    sizes, windows = plan["sizes"], plan["windows"]
    colors = {
        "rocketq": "#d62728",
        "redis": "#1f77b4",
        "rabbitmq": "#ff7f0e",
        "nats": "#2ca02c",
        "beanstalkd": "#9467bd",
    }
    out = []
    # throughput: rows = tiers, cols = windows; grouped bars per size, log scale, min–max whiskers
    fig, axes = plt.subplots(
        len(tiers), len(windows), figsize=(5.5 * len(windows), 3.6 * len(tiers)), squeeze=False
    )
    for i, tier in enumerate(tiers):
        keys = ag.keys(tier)
        for j, w in enumerate(windows):
            ax = axes[i][j]
            width = 0.8 / max(1, len(keys))
            for n, k in enumerate(keys):
                xs, ys, lo, hi = [], [], [], []
                for si, size in enumerate(sizes):
                    vals = ag.values(k, (size, w, 0), "pub_rate")
                    if not vals:
                        continue
                    md = statistics.median(vals)
                    xs.append(si + (n - (len(keys) - 1) / 2) * width)
                    ys.append(md)
                    lo.append(md - min(vals))
                    hi.append(max(vals) - md)
                ax.bar(xs, ys, width, yerr=[lo, hi], label=LABEL[k[0]], color=colors[k[0]], capsize=2)
            ax.set_xticks(range(len(sizes)), [f"{s} B" for s in sizes])
            ax.set_yscale("log")
            ax.set_title(f"tier {tier}, {w} in flight: publish msg/s")
            ax.grid(axis="y", alpha=0.3)
            if i == 0 and j == 0:
                ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(img_dir, "peers-throughput.png"), dpi=90)
    plt.close(fig)
    out.append("peers-throughput.png")
    # latency: rows = tiers, cols = windows; colour = system, filled/solid = publish-ack, hollow/dashed = e2e
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(
        len(tiers), len(windows), figsize=(5.5 * len(windows), 3.6 * len(tiers)), squeeze=False
    )
    for i, tier in enumerate(tiers):
        keys = ag.keys(tier)
        for j, w in enumerate(windows):
            ax = axes[i][j]
            for k in keys:
                for field, style, face in (("lat_ack", "-", colors[k[0]]), ("lat_e2e", "--", "none")):
                    for p, marker in (("p50", "o"), ("p99", "^")):
                        ys = [ag.median(k, (s, w, 0), field, p) for s in sizes]
                        ax.plot(
                            [f"{s} B" for s in sizes],
                            [y / 1000 if y else None for y in ys],
                            style,
                            marker=marker,
                            color=colors[k[0]],
                            markerfacecolor=face,
                            alpha=0.9,
                        )
            ax.set_yscale("log")
            ax.set_ylabel("ms")
            ax.set_title(f"tier {tier}, ≤{w} in flight: latency at {plan['lat_fraction']:.0%} of sustained")
            ax.grid(alpha=0.3)
    present = [s for s in SYSTEMS if any((s, t) in ag.runs for t in tiers)]
    handles = [Line2D([], [], color=colors[s], lw=6, label=LABEL[s]) for s in present]
    handles += [
        Line2D([], [], color="k", ls="-", marker="o", label="publish-ack p50"),
        Line2D([], [], color="k", ls="-", marker="^", label="publish-ack p99"),
        Line2D([], [], color="k", ls="--", marker="o", markerfacecolor="none", label="end-to-end p50"),
        Line2D([], [], color="k", ls="--", marker="^", markerfacecolor="none", label="end-to-end p99"),
    ]
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=4)
    fig.tight_layout(rect=(0, 0.1 if len(tiers) > 1 else 0.2, 1, 1))
    fig.savefig(os.path.join(img_dir, "peers-latency.png"), dpi=90)
    plt.close(fig)
    out.append("peers-latency.png")
    return out


_SECTION = re.compile(r"^## Peers\s*$.*?(?=^## |\Z)", re.M | re.S)


def write_section(path: str, text: str) -> None:
    """Replace the '## Peers' section of ``path`` (or append it); other sections stay byte for byte."""
    try:
        with open(path) as f:
            doc = f.read()
    except FileNotFoundError:
        doc = "# Benchmarks\n"
    if _SECTION.search(doc):
        doc = _SECTION.sub(lambda _m: text.rstrip() + "\n\n", doc, count=1)
    else:
        doc = doc.rstrip() + "\n\n" + text
    with open(path, "w") as f:
        f.write(doc.rstrip() + "\n")
