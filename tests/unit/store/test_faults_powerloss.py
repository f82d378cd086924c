"""Power loss under SYNC_FLUSH: only fsynced bytes survive, plus a torn tail -> no acknowledged message lost.

A child appends with SYNC_FLUSH and reports an append only after its flush_future returned True. It runs with
ROCKETQ_FAULTFS so every msync/fdatasync is recorded (rocketq.store.faultfs). After SIGKILL the test builds
the
directory a power cut would have left (synced bytes + random torn tail, sometimes a garbage sector) and
recovers
a store from it.
"""

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import faultkit
from test_faults_crash import run_child

from rocketq.store import faultfs

pytest.importorskip("rocketq.store.message_store")

ROUNDS = 8


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_power_cut_keeps_every_synced_ack(tmp_path):
    rng = random.Random(int(os.environ.get("FAULT_SEED", "4242")))
    total = 0
    for rnd in range(ROUNDS):
        live = str(tmp_path / f"live{rnd}")
        shadow = str(tmp_path / f"shadow{rnd}")
        env = dict(os.environ, **{faultfs.ENV_VAR: shadow})
        acks = run_child(live, "SYNC", rnd, rng, 0.2, 0.8, env=env)
        total += len(acks)
        rec = faultfs.open_recorder(shadow)
        img = str(tmp_path / f"img{rnd}")
        if rnd % 2:  # any subset of the dirty pages reached the disk (write-back order is arbitrary)
            rec.power_cut_image(live, img, rng=rng, mode="pages")
        else:  # a prefix of what was written after the last sync, maybe ending in a garbage sector
            rec.power_cut_image(live, img, rng=rng, max_torn_bytes=rng.choice([0, 512, 8192, 65536]))
        assert os.path.exists(os.path.join(img, "commitlog")), os.listdir(img)
        faultkit.verify_store(img, acks, "SYNC")
        # recovering twice gives the same answer (recovery is idempotent)
        faultkit.verify_store(img, acks, "SYNC")
    assert total > ROUNDS * 5, f"too few synced appends to mean anything: {total}"


def test_unsynced_async_data_may_vanish_but_store_stays_consistent(tmp_path):
    """ASYNC_FLUSH promises nothing on power loss; the recovered store must still be consistent (no corrupt,
    no gaps)."""
    rng = random.Random(99)
    live = str(tmp_path / "live")
    shadow = str(tmp_path / "shadow")
    env = dict(os.environ, **{faultfs.ENV_VAR: shadow})
    run_child(live, "ASYNC", 1, rng, 0.3, 0.3, env=env)
    rec = faultfs.open_recorder(shadow)
    img = str(tmp_path / "img")
    rec.power_cut_image(live, img, rng=rng, max_torn_bytes=65536)
    faultkit.verify_store(img, {}, "ASYNC")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_power_cut_keeps_every_ack_of_the_loop_driven_native_aio_group_commit(tmp_path):
    """The broker's SYNC_FLUSH path (store/loop_flush.py): rounds submitted from an asyncio loop through
    native AIO, appends from the loop in runs and from a thread; an append is reported only after the round
    covering it completed. A power cut keeps every reported append."""
    rng = random.Random(int(os.environ.get("FAULT_SEED", "2424")))
    total = 0
    for rnd in range(ROUNDS // 2):
        live = str(tmp_path / f"live{rnd}")
        shadow = str(tmp_path / f"shadow{rnd}")
        env = dict(os.environ, **{faultfs.ENV_VAR: shadow})
        acks = run_child(live, "SYNC_LOOP", rnd, rng, 0.2, 0.8, env=env)
        total += len(acks)
        assert any("tX" in t for t in acks.values()) and any("tL" in t for t in acks.values()), "both writers"
        rec = faultfs.open_recorder(shadow)
        img = str(tmp_path / f"img{rnd}")
        if rnd % 2:
            rec.power_cut_image(live, img, rng=rng, mode="pages")
        else:
            rec.power_cut_image(live, img, rng=rng, max_torn_bytes=rng.choice([0, 512, 65536]))
        faultkit.verify_store(img, acks, "SYNC")
    assert total > ROUNDS * 5, f"too few synced appends to mean anything: {total}"
