"""`rocketq bench peers --smoke`: every system (rocketq, Redis Streams, RabbitMQ, NATS JetStream, beanstalkd)
is installed by the harness's own installer, started on 127.0.0.1 and produces numbers. Never a pass/fail on
speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.peers import install  # noqa: E402
from bench.peers.report import write_section  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _positive(x: object) -> bool:
    return isinstance(x, int | float) and x > 0


def _share(x: object) -> bool:
    return isinstance(x, int | float) and 0 <= x <= 1


def _steal_ok(steal: dict) -> bool:
    """Steal on the servers' CPU and the load generator's, as shares of the phase (known on Linux)."""
    return _share(steal["server"]) and _share(steal["client"])


def test_system_order_rotates_per_repetition() -> None:
    from bench.peers.harness import Plan, system_order

    plan = Plan(systems=["rocketq", "redis", "rabbitmq", "nats"])
    orders = [system_order(plan, rep) for rep in range(5)]
    assert [o[0] for o in orders] == ["rocketq", "redis", "rabbitmq", "nats", "rocketq"]
    assert all(sorted(o) == sorted(plan.systems) for o in orders)  # every system, once, every repetition
    plan.rotate_order = False
    assert all(system_order(plan, rep) == plan.systems for rep in range(3))
    assert system_order(Plan(systems=[]), 2) == []


def test_write_section_replaces_only_peers(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(
        "# Benchmarks\n\n## Store\n\nstore text\n\n## Peers\n\nold\n\n## Remoting\n\nremoting text\n"
    )
    write_section(str(doc), "## Peers\n\nnew\n")
    text = doc.read_text()
    assert "old" not in text and "new" in text
    assert text.index("## Store") < text.index("## Peers") < text.index("## Remoting")
    assert "store text" in text and "remoting text" in text
    write_section(str(tmp_path / "fresh.md"), "## Peers\n\nx\n")
    assert (tmp_path / "fresh.md").read_text().startswith("# Benchmarks\n\n## Peers")


def test_smoke_every_system_produces_numbers(tmp_path: Path) -> None:
    problems = install.ensure_all(timeout_s=600)
    skipped = install.unavailable_systems(problems)
    assert "rocketq" not in skipped, skipped
    out = tmp_path / "peers.json"
    doc = tmp_path / "benchmarks.md"
    full = tmp_path / "full.md"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src")]))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.peers",
            "--smoke",
            "--no-install",
            "--json",
            str(out),
            "--out",
            str(doc),
            "--full-out",
            str(full),
            "--systems",
            ",".join(s for s in ("rocketq", "redis", "rabbitmq", "nats", "beanstalkd") if s not in skipped),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr.decode()[-4000:]
    results = json.loads(out.read_text())
    lim = results["limits"]
    assert (
        _positive(lim["dd"]["mb_s"]) and _positive(lim["loopback_mb_s"]) and _positive(lim["pingpong_rt_s"])
    )
    assert all(_positive(v) for v in lim["fsync_loop"].values())
    assert _steal_ok(lim["steal"]) and _steal_ok(results["machine"]["steal"])
    seen = {(r["system"], r["tier"]) for r in results["runs"]}
    expected = {
        ("rocketq", "A"),
        ("rocketq", "B"),
        ("redis", "A"),
        ("redis", "B"),
        ("rabbitmq", "A"),
        ("nats", "A"),
        ("nats", "B"),
        ("beanstalkd", "A"),
        ("beanstalkd", "B"),
    }
    expected = {k for k in expected if k[0] not in skipped}
    assert expected <= seen, (expected - seen, skipped)
    for r in results["runs"]:
        what = f"{r['system']}/{r['tier']}"
        assert "error" not in r, (what, r.get("error"), r.get("server_log"))
        assert r["cells"], what
        assert _steal_ok(r["steal"]), what
        for c in r["cells"]:
            assert _positive(c["pub_rate"]) and c["pub_errors"] == 0, (what, c)
            assert c["cons_n"] >= c["pub_n"], (what, c)  # every acknowledged message was consumed
            assert _positive(c["cpu_pub_us"]), (what, c)
            assert _steal_ok(c["steal_pub"]), (what, c)
            if c["batch"] <= 0:  # single sends, auto-batched ones too (AUTO_BATCH = -1)
                assert c["lat_ack"]["n"] > 0 and c["lat_e2e"]["n"] > 0, (what, c)
                assert c["lat_ack"]["p50"] <= c["lat_ack"]["p99"] <= c["lat_ack"]["max"], (what, c)
                # the sustainable-rate search ran its steps top down and kept the highest that held
                steps = c["sus_steps"]
                ladder = [s["fraction"] for s in steps if not s["refine"]]
                assert ladder and ladder == sorted(ladder, reverse=True), (what, steps)
                held = [s["rate"] for s in steps if s["ok"]]
                assert c["sus_rate"] == (max(held) if held else None), (what, c)
                assert c["lat_base"] == ("sustained" if held else "closed"), (what, c)
                for s in steps:  # a step that held had nothing missing
                    assert not s["ok"] or s["consumed"] >= s["n"] >= s["intended"] > 0, (what, s)
        assert (65536, 64) in {(c["size"], c["window"]) for c in r["cells"]}, what  # the MB/s ceiling cell
        assert set(r["shapes"]) == {"4p4c", "fanout2"}, what
        for name, sh in r["shapes"].items():
            # every group received every acknowledged message, from several producers / consumers
            assert sh["pub_n"] > 0 and sh["pub_errors"] == 0, (what, name, sh)
            assert sh["delivered"] >= sh["pub_n"] * sh["groups"], (what, name, sh)
            assert sh["consumers"] == (4 if name == "4p4c" else 2), (what, name, sh)
        assert r["backlog"]["drain_n"] >= r["backlog"]["n"] > 0, what
        if r["tier"] == "A":
            rec = r["recovery"]
            assert rec["acked"] > 0 and rec["lost"] == 0 and rec["first_publish_s"] is not None, (what, rec)
    if any(r["system"] == "rocketq" for r in results["runs"]):
        assert any(c["batch"] > 0 for r in results["runs"] if r["system"] == "rocketq" for c in r["cells"])
        assert any(c["batch"] == -1 for r in results["runs"] if r["system"] == "rocketq" for c in r["cells"])
        assert "rocketq single sends with `auto_batch=True`" in full.read_text()
        assert "The same single sends with the rocketq producer's `auto_batch=True`" in doc.read_text()
    text = doc.read_text()  # the docs page's compact section
    assert text.startswith("# Benchmarks") and "## Peers" in text and "### Headline" in text
    assert "### rocketq as a fraction of the limit that bounds it" in text
    assert "What bounds these figures" in text
    text = full.read_text()  # every table of the run
    assert "## Peers" in text and "### Noise floor" in text
    assert "### Shapes, tier A" in text and "| 4p4c | rocketq |" in text
    assert "Max sustainable publish msg/s" in text
    assert "### CPU steal" in text and "| rocketq | A |" in text[text.index("### CPU steal") :]
    for name in ("peers-throughput.png", "peers-latency.png"):
        png = tmp_path / "img" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    for _system, why in skipped.items():  # only an install failure may skip a peer, and it says why
        assert why
