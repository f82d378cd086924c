"""The NameServer's KV config is bounded and a flood of puts coalesces into few whole-file writes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rocketq.namesrv.kvconfig import KVConfigError, KVConfigManager


def test_entry_and_byte_limits(tmp_path: Path) -> None:
    kv = KVConfigManager(tmp_path / "kv.json", max_entries=3, max_bytes=100)
    kv.put("ns", "a", "1")
    kv.put("ns", "b", "2")
    kv.put("ns", "a", "3")  # an update needs no new entry
    kv.put("ns", "c", "4")
    with pytest.raises(KVConfigError, match="kvConfigMaxEntries=3"):
        kv.put("ns", "d", "5")
    with pytest.raises(KVConfigError, match="kvConfigMaxBytes=100"):
        kv.put("ns", "a", "x" * 100)
    assert kv.delete("ns", "c")
    kv.put("ns2", "d", "y" * 40)  # room again after the delete
    assert (kv.entries, kv.bytes) == (
        3,
        sum(len(s) for s in ("ns", "a", "3", "ns", "b", "2", "ns2", "d")) + 40,
    )


def test_flood_of_puts_coalesces_writes(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    kv = KVConfigManager(path, min_write_interval_s=0.2)

    async def flood() -> None:
        async def one(i: int) -> None:
            kv.put("ns", f"k{i % 50}", str(i))
            await kv.persist()

        for burst in range(3):  # 3 bursts of 100 concurrent puts, each answered only once written
            await asyncio.gather(*(one(burst * 100 + i) for i in range(100)))

    asyncio.run(flood())
    assert kv.writes <= 6, kv.writes  # not one whole-file write per put
    table = json.loads(path.read_bytes())["configTable"]["ns"]
    assert table["k49"] == "299" and len(table) == 50  # the last write holds the latest table


def test_load_counts_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    path.write_text(json.dumps({"configTable": {"ns": {"a": "1", "b": "2"}}}))
    kv = KVConfigManager(path, max_entries=1)
    kv.load()
    assert kv.entries == 2  # served as it is, over the limit
    with pytest.raises(KVConfigError):
        kv.put("ns", "c", "3")
