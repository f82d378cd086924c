"""bench/peer_pair.py: two rocketq brokers (one with an extra broker.conf line) driven in interleaved
phases, each phase reporting msg/s, ack percentiles and every CPU's busy time per message. Never a pass/fail
on speed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.peers import install  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_peer_pair_interleaves_and_accounts_cpu() -> None:
    problems = install.ensure_pip(timeout_s=240)  # the load generator's HdrHistogram
    assert "hdrhistogram" not in problems, problems
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src")]))
    systems = "rocketq,rocketq#messageIndexEnable=false"
    p = subprocess.run(
        [sys.executable, "bench/peer_pair.py", "--systems", systems, "--reps", "2", "--seconds", "0.5",
         "--window", "4"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    phases = re.findall(r"^rep (\d) (\S+)\s+([\d,]+) msg/s .* µs/msg (cpu0 busy .*)$", p.stdout, re.M)
    # A B, then B A
    assert [(rep, name) for rep, name, _, _ in phases] == [
        ("0", "rocketq"),
        ("0", "rocketq#messageIndexEnable=false"),
        ("1", "rocketq#messageIndexEnable=false"),
        ("1", "rocketq"),
    ], p.stdout
    for _, _, rate, cpus in phases:
        assert int(rate.replace(",", "")) > 0
        busy = [float(x) for x in re.findall(r"busy\s+([\d.]+)", cpus)]
        assert len(busy) == os.cpu_count() and sum(busy) > 0, cpus
    medians = re.findall(r"^  (\S+)\s+median\s+([\d,]+) msg/s .*÷ first ([\d.]+)$", p.stdout, re.M)
    assert [name for name, _, _ in medians] == ["rocketq", "rocketq#messageIndexEnable=false"]
    assert medians[0][2] == "1.00" and float(medians[1][2]) > 0
