"""`rocketq bench ha --smoke`: every phase (single master, ASYNC_MASTER + slave, SYNC_MASTER + slave, under
ASYNC_FLUSH and SYNC_FLUSH) and the catch-up produce numbers. Never a pass/fail on speed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(300)


def test_ha_bench_smoke_produces_numbers(tmp_path):
    out = tmp_path / "ha.json"
    r = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "bench", "ha", "--smoke", "--json", str(out)],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    phases = res["throughput"]
    assert sorted(phases) == sorted(
        f"{p}/{f}" for p in ("single", "async", "sync") for f in ("ASYNC_FLUSH", "SYNC_FLUSH")
    )
    for key, rows in phases.items():
        assert rows[0]["msg_s"] > 0 and rows[0]["p99_ms"] > 0, (key, rows)
        if not key.startswith("single"):
            assert rows[0]["ack_lag_ms_p99"] > 0, (key, rows)
    assert res["catchup"]["mb_s"] > 0 and res["catchup"]["dd_mb_s"] > 0
    assert "÷ single master" in r.stdout and "Catch-up of a" in r.stdout
