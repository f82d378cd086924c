"""CPU steal in the peers benchmark: /proc/stat parsing, the share per phase, and its report section (rendered
from a real archived run, with and without steal recorded)."""

from __future__ import annotations

import copy
import gzip
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.peers import report  # noqa: E402
from bench.peers.common import cpu_ticks, parse_cpu_ticks, steal_share  # noqa: E402

ARCHIVED = ROOT / "tests" / "bench" / "data" / "peers-run-7cd5efe.json.gz"  # a whole recorded run

STAT = """cpu  300 0 200 1000 10 0 5 90 0 0
cpu0 100 0 50 600 5 0 2 40 0 0
cpu1 200 0 150 400 5 0 3 50 7 0
intr 12345 0 0
ctxt 999
"""


def test_parse_cpu_ticks_reads_each_cpu_not_the_total() -> None:
    ticks = parse_cpu_ticks(STAT)
    assert ticks == {0: (40, 100 + 50 + 600 + 5 + 2 + 40), 1: (50, 200 + 150 + 400 + 5 + 3 + 50)}


def test_parse_cpu_ticks_skips_short_and_foreign_lines() -> None:
    assert parse_cpu_ticks("cpu0 1 2 3\ncpufreq 1 2 3 4 5 6 7 8\n") == {}


def test_steal_share_of_an_interval() -> None:
    before = {0: (40, 1000), 1: (50, 2000)}
    after = {0: (70, 1100), 1: (50, 2200)}
    assert steal_share(before, after, 0) == pytest.approx(0.30)
    assert steal_share(before, after, 1) == 0.0
    assert steal_share(before, after, 2) is None  # no such CPU
    assert steal_share(before, after, None) is None  # not pinned
    assert steal_share(before, before, 0) is None  # no time passed


def test_cpu_ticks_of_this_machine() -> None:
    ticks = cpu_ticks()
    if not Path("/proc/stat").exists():
        assert ticks == {}
        return
    assert 0 in ticks
    steal, total = ticks[0]
    assert 0 <= steal <= total and total > 0


def _archived() -> dict:
    with gzip.open(ARCHIVED) as f:
        return json.load(f)


def test_report_of_a_run_without_steal_has_no_steal_section() -> None:
    text = report.render(_archived(), None, detail=True)  # recorded before steal was
    assert "### Noise floor" in text and "### CPU steal" not in text


def test_report_steal_section_from_recorded_steal() -> None:
    results = copy.deepcopy(_archived())
    results["machine"]["steal"] = {"server": 0.25, "client": 0.125}
    results["limits"]["steal"] = {"server": 0.5, "client": 0.0}
    steady_pairs = stolen_pairs = 0
    for i, run in enumerate(results["runs"]):
        for c in run.get("cells", []):
            # rocketq's cells steady, every other system's stolen on the server CPU
            srv = 0.01 if run["system"] == "rocketq" else 0.2 + 0.01 * (i % 3)
            c["steal_pub"] = {"server": srv, "client": 0.02}
            if c.get("repeat"):
                if run["system"] == "rocketq":
                    steady_pairs += 1
                else:
                    stolen_pairs += 1
    text = report.render(results, None, detail=True)
    section = text[text.index("### CPU steal") :]
    assert "Whole run: server CPU 25.0 %, load generator CPU 12.5 %" in section
    assert "during the machine limits: 50.0 % and 0.0 %" in section
    rows = [line for line in section.splitlines() if line.startswith("| rocketq |")]
    assert rows and all("| 1.0 % |" in r or "| 1.0 [1.0–1.0] % |" in r for r in rows), rows
    assert all("2.0" in r for r in rows), rows
    assert any(line.startswith("| Redis Streams | A |") and "20.0" in line for line in section.splitlines())
    assert steady_pairs and stolen_pairs
    assert f"both cells: {steady_pairs}, median difference" in section
    assert f"the others: {stolen_pairs}, median difference" in section


def test_the_docs_page_gets_the_compact_section() -> None:
    """docs/benchmarks.md shows the headline, publish rates, latency at 1 KiB, resources and the bounds;
    --full-out keeps every table of the run."""
    compact = report.render(_archived(), None)
    full = report.render(_archived(), None, detail=True)
    for heading in ("### Headline", "### Throughput, tier A", "### Latency, tier A", "### Server resources"):
        assert heading in compact and heading in full
    assert "### rocketq as a fraction of the limit that bounds it" in compact
    for heading in ("### Noise floor", "Publish MB/s of payload", "### Latency against load"):
        assert heading not in compact and heading in full
    assert len(compact.splitlines()) < 200 < len(full.splitlines())
