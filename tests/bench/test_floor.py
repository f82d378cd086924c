"""bench/floor.py: the diagnostic broker variants are built from this checkout (an anchor that moved fails
the build), each answers sends as it claims (acknowledged, nothing stored), and the bare client's frame is
a real send (a normal broker stores every one of them)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.peer_pair import Entry  # noqa: E402
from bench.peers.sys_rocketq import RocketqClient  # noqa: E402

from bench import floor  # noqa: E402


@pytest.mark.parametrize("name", sorted(floor.VARIANTS))
def test_variant_is_this_checkout_plus_its_lines(tmp_path: Path, name: str) -> None:
    tree = Path(floor.build_variant(name, str(tmp_path / name)))
    for rel, anchor, insert in floor.VARIANTS[name]:
        text = (tree / "src" / rel).read_text()
        original = (ROOT / "src" / rel).read_text()
        assert text == original.replace(anchor, anchor + insert)
        compile(text, rel, "exec")
    untouched = "rocketq/store/commit_log.py"
    assert (tree / "src" / untouched).read_bytes() == (ROOT / "src" / untouched).read_bytes()


def test_a_moved_anchor_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rel, anchor, insert = floor.VARIANTS["floor"][0]
    monkeypatch.setitem(floor.VARIANTS, "floor", ((rel, anchor + "  # not in the code\n", insert),))
    with pytest.raises(ValueError, match="anchor not found"):
        floor.build_variant("floor", str(tmp_path / "t"))
    with pytest.raises(KeyError):
        floor.build_variant("no-such-variant", str(tmp_path / "u"))


async def _sends(spec: str, root: str, n: int) -> tuple[int, int | None]:
    """(sends acknowledged, messages the broker then holds) for n sends through spec's client."""
    e = Entry(spec, "B", root)
    try:
        await e.start("floor")
        ok = 0
        for i in range(n):
            await e.client.publish("floor", b"m%d" % i)  # raises unless the broker answered SEND_OK
            ok += 1
        await asyncio.sleep(0.3)  # the ConsumeQueue dispatch of a normal broker is synchronous; margin only
        return ok, await RocketqClient(e.server.client_args()).stored_count("floor")
    finally:
        await e.stop()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_variants_acknowledge_without_storing_and_the_bare_frame_stores(tmp_path: Path) -> None:
    os.environ.setdefault("PYTHONPATH", os.pathsep.join([str(ROOT), str(ROOT / "src")]))

    async def run() -> dict[str, tuple[int, int | None]]:
        out = {}
        for i, spec in enumerate(("rocketq+bare", "rocketq%nostore", "rocketq%floor", "rocketq%floor+bare")):
            out[spec] = await _sends(spec, str(tmp_path / str(i)), 40)
        return out

    got = asyncio.run(run())
    assert got["rocketq+bare"] == (40, 40)  # a normal broker stores every bare send
    assert got["rocketq%nostore"] == (40, 0)
    assert got["rocketq%floor"] == (40, 0)
    assert got["rocketq%floor+bare"] == (40, 0)
