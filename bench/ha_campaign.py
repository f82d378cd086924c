"""Kill -9 of a master under load, round after round: what the acknowledged messages become on its slave.

    rocketq bench ha failover [--rounds 20] [--role SYNC_MASTER|ASYNC_MASTER] [--flush ASYNC_FLUSH]
                              [--inflight 64] [--size 1024] [--load-seconds 1.5] [--json FILE]

One NameServer, a master and its slave (real processes, 127.0.0.1, small segments). Each round: a producer
keeps 64 sends of 1 KiB in flight, each body unique; after --load-seconds the master is killed (SIGKILL) in
the middle of that load; every send is awaited. Then the slave — the only copy left if the master's disk had
died with it — is read back over PULL_MESSAGE, every queue from its first offset: each record's CRC is
checked, the queue offsets must be gapless, and every acknowledged (SEND_OK) body must be there. Reported
per round: acked, lost (acknowledged, not on the slave), duplicates (bodies stored twice: a resent send), and
the sends that failed. The master is then restarted on its own store; the slave must reconnect and catch up
without divergence (its log a byte prefix of the master's, byte-identical at the end of the campaign).

SYNC_MASTER promises lost = 0 (the seed's sync double write); ASYNC_MASTER measures the seed's "a few".
The CI test (tests/integration/test_ha_failover.py) runs 3 rounds of each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.integration.ha_support import (  # noqa: E402
    HACluster,
    create_topic,
    invoke,
    same_log,
    start_ha_cluster,
    topic_on,
    wait_caught_up,
    wait_slave_attached,
    wait_until,
)

from rocketq.client import Message, Producer, SendStatus  # noqa: E402
from rocketq.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rocketq.protocol.record import decode_records  # noqa: E402

TOPIC = "HA_FAILOVER"
QUEUES = 4


@dataclass
class RoundResult:
    round: int
    acked: int
    lost: int
    duplicates: int
    failed_sends: int
    other_status: dict[str, int]
    slave_messages: int
    gapless: bool
    crc_ok: bool
    seconds: float


@dataclass
class Campaign:
    role: str
    flush: str
    inflight: int
    size: int
    rounds: list[RoundResult] = field(default_factory=list)
    final_byte_identical: bool = False

    @property
    def totals(self) -> dict[str, int]:
        return {
            "acked": sum(r.acked for r in self.rounds),
            "lost": sum(r.lost for r in self.rounds),
            "duplicates": sum(r.duplicates for r in self.rounds),
            "failed_sends": sum(r.failed_sends for r in self.rounds),
        }


async def load(
    ns: str, tag: str, seconds: float, inflight: int, size: int, kill
) -> tuple[list[bytes], int, Counter]:
    """Keep ``inflight`` sends going for ``seconds``, call kill(), go on until every send ended. Returns the
    acknowledged bodies, the failed sends and the other statuses."""
    acked: list[bytes] = []
    failed = 0
    statuses: Counter = Counter()
    stop = asyncio.Event()
    pad = b"." * max(size - 32, 0)
    counter = iter(range(1 << 40))

    async with Producer(f"PG_{tag}", namesrv=ns, send_msg_timeout=5000) as p:

        async def sender() -> None:
            nonlocal failed
            while not stop.is_set():
                body = f"{tag}-{next(counter):09d}|".encode() + pad
                try:
                    r = await p.send(Message(TOPIC, body))
                except Exception:
                    failed += 1
                    await asyncio.sleep(0.05)
                    continue
                if r.status is SendStatus.SEND_OK:
                    acked.append(body)
                else:
                    statuses[r.status.name] += 1

        tasks = [asyncio.create_task(sender()) for _ in range(inflight)]
        await asyncio.sleep(seconds)
        await asyncio.get_running_loop().run_in_executor(None, kill)
        await asyncio.sleep(0.5)  # sends in flight at the kill end (fail) meanwhile
        stop.set()
        await asyncio.gather(*tasks)
    return acked, failed, statuses


async def read_slave(addr: str) -> tuple[list[bytes], bool, bool]:
    """Every message of the topic on the broker at addr: (bodies, queue offsets gapless, CRCs valid)."""
    bodies: list[bytes] = []
    gapless = crc_ok = True
    for qid in range(QUEUES):
        offset = 0
        expected = None
        while True:
            ext = {"consumerGroup": "CG_ha_check", "topic": TOPIC, "queueId": str(qid),
                   "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
                   "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                   "expressionType": "TAG"}  # fmt: skip
            resp = await invoke(addr, RequestCode.PULL_MESSAGE, ext)
            nxt = int(resp.ext_fields.get("nextBeginOffset", offset))
            if resp.code == ResponseCode.PULL_OFFSET_MOVED and nxt > offset:
                offset = nxt  # the queue starts later (the slave began at a later segment)
                continue
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                raise RuntimeError(f"{addr} does not know {TOPIC}: its metadata sync has not run")
            if resp.code != ResponseCode.SUCCESS:
                break
            try:
                msgs = decode_records(resp.body_bytes, verify_crc=True)
            except Exception:
                crc_ok = False
                break
            for m in msgs:
                if expected is not None and m.queue_offset != expected:
                    gapless = False
                expected = m.queue_offset + 1
                bodies.append(bytes(m.body))
            offset = nxt
    return bodies, gapless, crc_ok


def run_campaign(
    home: Path,
    rounds: int,
    role: str = "SYNC_MASTER",
    flush: str = "ASYNC_FLUSH",
    inflight: int = 64,
    size: int = 1024,
    load_seconds: float = 1.5,
    log=print,
) -> Campaign:
    camp = Campaign(role, flush, inflight, size)
    cluster: HACluster = start_ha_cluster(home)
    try:
        extra = {"flushDiskType": flush, "slaveTimeout": "3000"}
        m = cluster.add("m", "broker-ha", role, **extra)
        create_topic(m.addr, TOPIC, QUEUES)
        s = cluster.add("s", "broker-ha", "SLAVE", 1, **extra)  # copies the topic when it meets its master
        wait_slave_attached(m)
        wait_until(lambda: topic_on(s.addr, TOPIC), 30, "the topic on the slave (metadata sync)")
        seen_before: Counter = Counter()
        for r in range(1, rounds + 1):
            t0 = time.monotonic()
            tag = f"r{r:03d}"
            acked, failed, statuses = asyncio.run(
                load(cluster.ns, tag, load_seconds, inflight, size, lambda: cluster.kill("m"))
            )
            bodies, gapless, crc_ok = asyncio.run(read_slave(s.addr))
            present = Counter(bodies)
            this_round = Counter({b: n for b, n in present.items() if b.startswith(tag.encode())})
            lost = sum(1 for b in acked if b not in present)
            dups = sum(n - 1 for n in this_round.values() if n > 1)
            res = RoundResult(
                r, len(acked), lost, dups, failed, dict(statuses), len(bodies), gapless, crc_ok,
                round(time.monotonic() - t0, 2),
            )  # fmt: skip
            camp.rounds.append(res)
            log(f"round {r}: acked {res.acked} lost {res.lost} duplicates {res.duplicates} failed sends "
                f"{res.failed_sends} other {res.other_status} gapless {gapless} crc {crc_ok}")  # fmt: skip
            # older rounds' messages are all still there
            for b, n in seen_before.items():
                if present.get(b, 0) < n:
                    raise AssertionError(f"a message of an earlier round vanished from the slave: {b[:20]!r}")
            seen_before = present
            cluster.start("m")  # the master comes back on its own store; the slave reconnects
            wait_slave_attached(m, timeout=60)
            wait_caught_up(m, s)
        assert cluster.stop("s") == 0 and cluster.stop("m") == 0
        camp.final_byte_identical = same_log(m, s)
        return camp
    finally:
        cluster.close()


def report(camp: Campaign) -> str:
    t = camp.totals
    lines = [
        f"{camp.role} + SLAVE, {camp.flush}, {camp.inflight} in flight, {camp.size} B: "
        f"{len(camp.rounds)} rounds",
        f"acked {t['acked']}  lost {t['lost']}  duplicates {t['duplicates']}  "
        f"failed sends {t['failed_sends']}  "
        f"byte-identical after the last restart: {camp.final_byte_identical}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rocketq bench ha failover", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--role", default="SYNC_MASTER", choices=("SYNC_MASTER", "ASYNC_MASTER"))
    ap.add_argument("--flush", default="ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--load-seconds", type=float, default=1.5)
    ap.add_argument("--json", help="write the rounds as JSON here")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rocketq-ha-failover-") as tmp:
        camp = run_campaign(Path(tmp), a.rounds, a.role, a.flush, a.inflight, a.size, a.load_seconds)
    print(report(camp))
    if a.json:
        Path(a.json).write_text(json.dumps({**asdict(camp), "totals": camp.totals}, indent=2))
    bad = camp.role == "SYNC_MASTER" and camp.totals["lost"] > 0
    bad = bad or not all(r.gapless and r.crc_ok for r in camp.rounds) or not camp.final_byte_identical
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
