"""Smoke runs of the security benchmarks: numbers come out (never a pass/fail on speed).

`rocketq bench fuzz --smoke` (atheris on the frame decoder) and `rocketq bench guard --smoke` (the memory and
connection attacks of issue 33 against a real broker and NameServer, scaled down)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_fuzz_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "fuzz.json"
    p = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "bench", "fuzz", "--smoke", "--targets", "frame.stream",
         "--artifacts", str(tmp_path / "artifacts"), "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    outcomes = json.loads(out.read_text())
    assert [o["target"] for o in outcomes] == ["frame.stream"]
    assert all(o["runs"] > 0 and o["execs_per_s"] > 0 and o["findings"] == 0 for o in outcomes), outcomes
    assert all(o["cov"] > 0 for o in outcomes if o["engine"] == "atheris"), outcomes


def test_guard_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "guard.json"
    p = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "bench", "guard", "--smoke", "--json", str(out),
         "--conf", "serverFrameReadTimeoutMillis=2000"],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    results = {r["target"]: r for r in json.loads(out.read_text())}
    assert set(results) == {"broker", "namesrv"}
    for r in results.values():
        assert r["baseline_rss_mib"] > 0 and r["peak_rss_mib"] > 0 and r["probe_ok"], r
        assert r["dribble_closed"] == r["dribble_conns"] > 0, r  # the frame deadline closed them
