"""What checking the body CRC on the read path costs, per message (issue 33, item 3).

    rocketq bench read-crc [--n 20000] [--runs 5] [--sizes 128,1024,16384] [--smoke]
    python bench/read_crc_bench.py ...

Two measurements per message size, each with the check off and on, in one process (no network):

  broker   MessageStore.get_message in pulls of 32 from a ConsumeQueue of --n stored messages (the pull
           path's store part: CQ units, header check, slicing, and with checkCRCOnRead the body CRC)
  client   rocketq.client.codec.decode_records over the same pulled bodies (the PushConsumer's decoding, and
           with ClientConfig.check_crc the body CRC)

Each cell is the median over --runs of thread-CPU µs per message; "+µs" and "+%" are what the check adds.

  --e2e    the whole pull path: a `rocketq standalone` holding --n messages of each size is started with
           checkCRCOnRead=false and =true in turn (--runs times each, alternating) and drained by pulls of
           32 from its 4 queues; the cell is the broker process's CPU (all threads) per message pulled.
           Here the check also warms the CPU cache for the socket write that follows it, so part of its
           cost on large bodies moves rather than adds.

Figures taken while other work loads the machine are noisy: compare on and off within one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
sys.path.insert(0, os.path.dirname(HERE))  # bench.peers

TOPIC = "CrcBench"
BATCH = 32


def _store(root: str, check: bool):
    from rocketq.store import MessageStore, StoreConfig

    cfg = StoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commitlog=256 << 20,
        max_hash_slot_num=50_000,
        max_index_num=200_000,
        message_index_enable=False,
        check_crc_on_read=check,
        disk_space_warning_level_ratio=100,
        disk_space_clean_forcibly_ratio=100,
    )
    store = MessageStore(cfg, ("127.0.0.1", 10911))
    store.start()
    return store


def _fill(root: str, n: int, size: int) -> None:
    from rocketq.store import MessageToStore, PutMessageStatus

    store = _store(root, True)
    try:
        for i in range(n):
            body = os.urandom(size)
            props = {"UNIQ_KEY": f"{i:032X}", "WAIT": "true"}
            r = store.put_message(MessageToStore(topic=TOPIC, queue_id=0, body=body, properties=props))
            if r.status != PutMessageStatus.PUT_OK:
                raise RuntimeError(f"put failed: {r.status}")
        deadline = time.monotonic() + 60
        while store.get_max_offset_in_queue(TOPIC, 0) < n and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        store.shutdown()


def _pull_all(store, n: int) -> tuple[float, list[bytes]]:
    """Thread-CPU seconds to pull n messages in batches of 32, and the pulled bodies (as a broker sends)."""
    from rocketq.store import GetMessageStatus

    bodies = []
    off = 0
    t0 = time.thread_time()
    while off < n:
        r = store.get_message("bench", TOPIC, 0, off, BATCH, None)
        if r.status != GetMessageStatus.FOUND:
            raise RuntimeError(f"pull at {off}: {r.status.name}")
        bodies.append(r.buffers)
        off = r.next_begin_offset
    spent = time.thread_time() - t0
    out = [b"".join(bufs) for bufs in bodies]
    for bufs in bodies:
        for b in bufs:
            b.release()
    return spent, out


def _decode_all(bodies: list[bytes], check: bool) -> float:
    from rocketq.client.codec import decode_records

    t0 = time.thread_time()
    for body in bodies:
        decode_records(body, "bench", None, check)
    return time.thread_time() - t0


def measure(n: int, runs: int, size: int) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="rocketq-read-crc-")
    try:
        _fill(root, n, size)
        cells: dict[str, list[float]] = {"broker_off": [], "broker_on": [], "client_off": [], "client_on": []}
        store = _store(root, False)
        try:
            for _ in range(runs):
                for check in (False, True):  # alternated so drifts in machine load hit both
                    store.config.check_crc_on_read = check  # read per pull
                    spent, bodies = _pull_all(store, n)
                    cells[f"broker_{'on' if check else 'off'}"].append(spent * 1e6 / n)
                for check in (False, True):
                    cells[f"client_{'on' if check else 'off'}"].append(_decode_all(bodies, check) * 1e6 / n)
        finally:
            store.shutdown()
        return {k: statistics.median(v) for k, v in cells.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- end to end: a broker process -----------------------------------------------------------------------
def _cpu_s(pid: int) -> float:
    """CPU seconds of all the process's threads, in ns (schedstat; /proc/PID/stat counts 10 ms ticks)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total / 1e9


def _start_standalone(home: str, check: bool):
    import subprocess

    from bench.peers.common import free_port
    from bench.peers.sys_rocketq import DISK_GUARD_CONF

    ns, bp = free_port(), free_port()
    conf = os.path.join(home, "broker.conf")
    with open(conf, "w") as f:
        f.write(f"brokerName=broker-a\nmapedFileSizeCommitLog={256 << 20}\nmessageIndexEnable=false\n")
        f.write(f"checkCRCOnRead={'true' if check else 'false'}\n{DISK_GUARD_CONF}")
    cmd = [sys.executable, "-m", "rocketq.cli", "standalone", "--home", home, "--namesrv-port", str(ns),
           "--broker-port", str(bp), "-c", conf, "--log-level", "WARNING"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), f"127.0.0.1:{bp}"


async def _e2e_fill(addr: str, n: int, size: int) -> None:
    import asyncio

    from rocketq.protocol.codes import RequestCode
    from rocketq.protocol.frame import RemotingCommand
    from rocketq.remoting import RemotingClient

    async with RemotingClient() as c:
        ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
               "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
               "order": "false"}  # fmt: skip
        r = await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 10)
        assert r.code == 0, r.remark
        sem = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            async with sem:
                h = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
                     "g": str(int(time.time() * 1000)), "h": "0", "i": f"UNIQ_KEY\x01{i:032X}\x02", "j": "0",
                     "k": "false"}  # fmt: skip
                req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h, os.urandom(size))
                resp = await c.invoke(addr, req, 10)
                assert resp.code == 0, resp.remark

        await asyncio.gather(*(one(i) for i in range(n)))


async def _e2e_drain(addr: str, n: int) -> int:
    import asyncio

    from rocketq.protocol.codes import RequestCode
    from rocketq.protocol.frame import RemotingCommand
    from rocketq.remoting import RemotingClient

    async with RemotingClient() as c:

        async def queue(qid: int) -> int:
            got, off = 0, 0
            while True:
                ext = {"consumerGroup": "CrcBenchG", "topic": TOPIC, "queueId": str(qid),
                       "queueOffset": str(off), "maxMsgNums": str(BATCH), "sysFlag": "4", "commitOffset": "0",
                       "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                       "expressionType": "TAG"}  # fmt: skip
                r = await c.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), 10)
                if r.code != 0:
                    return got
                nxt = int(r.ext_fields["nextBeginOffset"])
                got += nxt - off
                off = nxt

        return sum(await asyncio.gather(*(queue(q) for q in range(4))))


def measure_e2e(n: int, runs: int, size: int) -> dict[str, float]:
    import asyncio
    import socket

    home = tempfile.mkdtemp(prefix="rocketq-read-crc-e2e-")

    def up(check: bool):
        proc, addr = _start_standalone(home, check)
        host, port = addr.split(":")
        for _ in range(300):
            try:
                socket.create_connection((host, int(port)), 0.2).close()
                return proc, addr
            except OSError:
                time.sleep(0.1)
        proc.kill()
        raise RuntimeError("broker did not start")

    try:
        proc, addr = up(True)
        asyncio.run(_e2e_fill(addr, n, size))
        proc.terminate()
        proc.wait()
        cells: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(runs):
            for check in (False, True):
                proc, addr = up(check)
                try:
                    asyncio.run(_e2e_drain(addr, n))  # warm: page cache, code paths
                    c0 = _cpu_s(proc.pid)
                    got = asyncio.run(_e2e_drain(addr, n))
                    if got != n:
                        raise RuntimeError(f"pulled {got} of {n} messages")
                    cells["on" if check else "off"].append((_cpu_s(proc.pid) - c0) * 1e6 / max(got, 1))
                finally:
                    proc.terminate()
                    proc.wait()
        return {k: statistics.median(v) for k, v in cells.items()}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rocketq bench read-crc", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=20_000, help="messages stored and pulled per size")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--sizes", default="128,1024,16384", help="body sizes in bytes, comma-separated")
    p.add_argument("--smoke", action="store_true", help="a few hundred messages, one run (checks it works)")
    p.add_argument("--e2e", action="store_true", help="also the broker process's CPU per pulled message")
    a = p.parse_args(argv)
    if a.smoke:
        a.n, a.runs, a.sizes = 2000, 1, "1024"
    from rocketq.protocol.crc import IMPLEMENTATION

    print(f"body CRC on the read path, µs of thread CPU per message (median of {a.runs}; {IMPLEMENTATION})")
    print(f"{'size':>6} | {'broker off':>10} {'on':>7} {'+µs':>6} {'+%':>5} | {'client off':>10} {'on':>7} "
          f"{'+µs':>6} {'+%':>5}")  # fmt: skip
    for size in (int(s) for s in a.sizes.split(",")):
        r = measure(a.n, a.runs, size)
        bd, cd = r["broker_on"] - r["broker_off"], r["client_on"] - r["client_off"]
        print(
            f"{size:>6} | {r['broker_off']:>10.2f} {r['broker_on']:>7.2f} {bd:>6.2f} "
            f"{100 * bd / r['broker_off']:>5.0f} | {r['client_off']:>10.2f} {r['client_on']:>7.2f} "
            f"{cd:>6.2f} {100 * cd / r['client_off']:>5.0f}",
            flush=True,
        )
    if a.e2e:
        print(f"\nwhole pull path: broker process CPU µs per pulled message (median of {a.runs})")
        print(f"{'size':>6} | {'off':>7} {'on':>7} {'+µs':>6} {'+%':>5}")
        for size in (int(s) for s in a.sizes.split(",")):
            r = measure_e2e(a.n, a.runs, size)
            d = r["on"] - r["off"]
            pct = 100 * d / r["off"] if r["off"] else 0.0  # --smoke: below the clock tick
            print(f"{size:>6} | {r['off']:>7.2f} {r['on']:>7.2f} {d:>6.2f} {pct:>5.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
