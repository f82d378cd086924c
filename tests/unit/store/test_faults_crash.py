"""Crash safety: a child appending under load is SIGKILLed at random moments, repeatedly, on the same store.

After every kill the store is recovered in this process and must hold every append the child saw acknowledged
(ASYNC_FLUSH: PUT_OK is enough, the page cache survives a process kill), at its queue offset, with gapless
offsets and valid CRCs, and no record the child never attempted.
"""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import faultkit

pytest.importorskip("rocketq.store.message_store")

ROUNDS = 20


def run_child(root, mode, seed, rng, min_run=0.05, max_run=0.5, env=None):
    """Start the writer, let it run a random while after it is ready, SIGKILL it; return its acks."""
    p = subprocess.Popen(
        [sys.executable, faultkit.__file__, root, mode, str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        line = p.stdout.readline()
        assert line == b"ready\n", (line, p.stderr.read() if p.poll() is not None else b"")
        time.sleep(rng.uniform(min_run, max_run))
        p.send_signal(signal.SIGKILL)
        out = p.stdout.read()
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
    return faultkit.parse_acks(out)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigkill_under_load_loses_no_acked_append(tmp_path):
    rng = random.Random(int(os.environ.get("FAULT_SEED", "12345")))
    root = str(tmp_path / "store")
    acks: dict = {}
    total_acked = 0
    started = time.monotonic()
    for rnd in range(ROUNDS):
        new = run_child(root, "ASYNC", rnd, rng)
        total_acked += len(new)
        # a later round may legitimately reuse an offset only if it was never acked before
        for k, v in new.items():
            assert k not in acks, f"round {rnd}: offset {k} acked twice ({acks[k]} then {v})"
        acks.update(new)
        info = faultkit.verify_store(root, acks)
        assert info["records"] >= len(acks)
        assert time.monotonic() - started < 200, "crash test exceeded its time budget"
    assert total_acked > ROUNDS * 10, f"too little load to mean anything: {total_acked}"
