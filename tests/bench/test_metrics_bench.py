"""`rocketq bench metrics --smoke`: the exporter's cost benchmark runs and prints numbers (never a pass/fail
on speed)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_metrics_bench_smoke_prints_numbers() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "bench", "metrics", "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    res = json.loads(line[len("RESULT ") :])
    assert set(res["send_path"]) == {"DISABLE", "PROM", "PROM+rpc"}
    assert all(v > 0 for v in res["send_path"].values())
    assert res["messages"] == 5000 and res["render_ms"] > 0 and res["prepare_ms"] > 0
