"""Crash at chosen points (ROCKETQ_CRASH_AT=<point>:<n>, os._exit inside the store) and recover.

Points the store core is asked to call (notes-store-faults.md §3): commitlog.after_append (record in the map,
before dispatch), commitlog.roll (a new segment taken, nothing written yet), checkpoint.flush (before the
checkpoint write), cq.after_put (unit written, before the max offset moves). A point the store does not call
yet is reported as xfail, not as a pass.
"""

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import faultkit

from rocketq.store import faultfs

pytest.importorskip("rocketq.store.message_store")

POINTS = ["commitlog.after_append:200", "commitlog.roll:2", "checkpoint.flush:2", "cq.after_put:300"]


def test_crash_point_exits_only_when_armed():
    faultfs.set_crash_point("x.y:2")
    try:
        faultfs.crash_point("other")
        faultfs.crash_point("x.y")  # first hit: armed for the second
    finally:
        faultfs.set_crash_point(None)
    code = "from rocketq.store import faultfs as f\nf.crash_point('p')\nf.crash_point('p')\nprint('alive')"
    r = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, **{faultfs.CRASH_ENV: "p:2"}), capture_output=True
    )
    assert r.returncode == faultfs.CRASH_EXIT_CODE and b"alive" not in r.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("point", POINTS)
def test_crash_at_point_then_recover(tmp_path, point):
    root = str(tmp_path / "store")
    env = dict(os.environ, **{faultfs.CRASH_ENV: point})
    p = subprocess.Popen(
        [sys.executable, faultkit.__file__, root, "ASYNC", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        out, _ = p.communicate(timeout=4)
        crashed = p.returncode == faultfs.CRASH_EXIT_CODE
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        crashed = False
    acks = faultkit.parse_acks(out)
    faultkit.verify_store(root, acks)  # recovery must hold either way
    if not crashed:
        pytest.xfail(f"store core does not call faultfs.crash_point({point.split(':')[0]!r}) yet")
