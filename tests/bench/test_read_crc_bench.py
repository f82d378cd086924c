"""`rocketq bench read-crc --smoke --e2e`: the read-path CRC benchmark runs and prints numbers (never a
pass/fail on speed)."""

from __future__ import annotations

import re
import subprocess
import sys


def test_read_crc_bench_smoke_prints_numbers() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.cli", "bench", "read-crc", "--smoke", "--e2e"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    number = r"-?\d+\.\d+"
    rows = [line for line in out.stdout.splitlines() if re.match(r"\s*1024 \|", line)]
    assert len(rows) == 2, out.stdout  # the in-process table and the whole-pull-path table
    micro, e2e = (re.findall(number, r) for r in rows)
    assert len(micro) == 6 and float(micro[0]) > 0 and float(micro[1]) > 0, rows[0]
    assert len(e2e) == 3 and float(e2e[0]) > 0 and float(e2e[1]) > 0, rows[1]
