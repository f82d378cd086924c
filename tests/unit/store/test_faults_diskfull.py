"""Disk full on a small tmpfs: writes fail with a clear status, earlier data stays intact, writes resume once
space returns. The store runs in a child process so that a SIGBUS (a write into an unbacked mmap page) would
show up as a failed child instead of killing the test runner."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(__file__))

pytest.importorskip("rocketq.store.message_store")

CHILD = textwrap.dedent(
    """
    import json, os, random, sys
    sys.path.insert(0, {here!r})
    import faultkit
    from rocketq.store import PutMessageStatus
    root = sys.argv[1]
    store = faultkit.open_store(root, "ASYNC", mapped_file_size_commitlog=1 << 20,
                                mapped_file_size_consume_queue=20 * 4096, max_hash_slot_num=64,
                                max_index_num=256, disk_space_warning_level_ratio=90,
                                disk_space_clean_forcibly_ratio=85)  # RocketMQ's guard levels, on a tmpfs
    rng = random.Random(3)
    acked = {{}}
    n = 0

    def put_until_failure(limit):
        global n
        statuses = {{}}
        for _ in range(limit):
            q = n % faultkit.QUEUES
            tok = f"s0t0n{{n}}"
            n += 1
            r = store.put_message(faultkit.make_msg(q, tok, rng))
            statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
            if r.status == PutMessageStatus.PUT_OK:
                acked[(q, r.queue_offset)] = tok
            elif statuses[r.status.name] >= 20:
                break
        return statuses

    def check():
        for q in range(faultkit.QUEUES):
            got = faultkit.read_queue(store, q)
            for (aq, off), tok in acked.items():
                if aq == q:
                    assert got.get(off) == tok, (q, off, tok, got.get(off))
        return len(acked)

    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "fill":
            st = put_until_failure(100000)
            import time; time.sleep(0.5)
            out = {{"statuses": st, "acked": check()}}
        elif cmd == "more":
            st = put_until_failure(50)
            import time; time.sleep(0.3)
            out = {{"statuses": st, "acked": check()}}
        elif cmd == "clean":
            # one retention pass now (its thread runs every 10 s); never delete unexpired data in this test
            store.config.clean_file_forcibly_enable = False
            store.clean.run_once()
            out = {{"disk_full": store.clean.disk_full, "ratio": store.clean.stats.last_ratio}}
        elif cmd == "restart":
            store.shutdown()
            store = faultkit.open_store(root, "ASYNC", mapped_file_size_commitlog=1 << 20,
                                        mapped_file_size_consume_queue=20 * 4096, max_hash_slot_num=64,
                                        max_index_num=256, disk_space_warning_level_ratio=90,
                                        disk_space_clean_forcibly_ratio=85)
            out = {{"acked": check()}}
        else:
            break
        print(json.dumps(out), flush=True)
    store.shutdown()
    """
).format(here=os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_disk_full_clear_error_no_corruption_and_resume(small_tmpfs):
    ballast = small_tmpfs / "ballast"
    with open(ballast, "wb") as f:
        f.write(b"\0" * (3 << 20))  # 3 MiB we can free later
    root = str(small_tmpfs / "store")
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, root],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def ask(cmd):
        p.stdin.write(cmd + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        assert line, f"store child died (rc={p.wait()}): {p.stderr.read()[-3000:]}"
        return json.loads(line)

    try:
        first = ask("fill")
        st = first["statuses"]
        assert st.get("PUT_OK", 0) > 100, st
        print("disk-full statuses:", st)
        failures = {k for k in st if k != "PUT_OK"}
        assert failures, f"never ran out of space? {st}"
        assert failures <= {"CREATE_MAPEDFILE_FAILED", "SERVICE_NOT_AVAILABLE", "OS_PAGECACHE_BUSY"}, st
        still = ask("more")  # still full: still refused, data still intact
        assert still["statuses"].get("PUT_OK", 0) == 0, still
        flag = ask("clean")  # the CleanService sees > 90 % used: the store refuses writes up front
        assert flag["disk_full"], flag
        refused = ask("more")
        assert set(refused["statuses"]) == {"SERVICE_NOT_AVAILABLE"}, refused
        os.remove(ballast)  # space returns
        flag = ask("clean")
        assert not flag["disk_full"], flag
        resumed = ask("more")
        assert resumed["statuses"].get("PUT_OK", 0) > 0, resumed
        assert resumed["acked"] > first["acked"]
        after = ask("restart")
        assert after["acked"] == resumed["acked"]
    finally:
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
        p.wait(timeout=30)
        p.stdout.close()
        p.stderr.close()
    assert p.returncode == 0, f"child ended with {p.returncode} (negative = signal, e.g. SIGBUS)"
