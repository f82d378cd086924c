"""Offset stores: increase-only updates and the broadcasting file store surviving a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketq.client.message import MessageQueue
from rocketq.client.offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_local_file_store_round_trip(tmp_path: Path) -> None:
    async def go() -> None:
        s = LocalFileOffsetStore("127.0.0.1@1", "G", tmp_path)
        await s.load()
        assert await s.read_offset(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == -1
        s.update_offset(MQ0, 10)
        s.update_offset(MQ0, 7, increase_only=True)
        s.update_offset(MQ1, 3)
        assert s.table[MQ0] == 10
        await s.persist_all([MQ0, MQ1])
        await s.persist_all([MQ0, MQ1])  # second write keeps a .bak
        assert (tmp_path / "127.0.0.1@1" / "G" / "offsets.json").exists()
        s2 = LocalFileOffsetStore("127.0.0.1@1", "G", tmp_path)
        await s2.load()
        assert s2.table == {MQ0: 10, MQ1: 3}
        assert await s2.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == 3

    asyncio.run(go())


def test_remote_store_reads_through_and_persists() -> None:
    broker: dict[MessageQueue, int] = {MQ1: 42}

    async def query(mq: MessageQueue) -> int:
        return broker.get(mq, -1)

    async def update(mq: MessageQueue, off: int) -> None:
        broker[mq] = off

    async def go() -> None:
        s = RemoteBrokerOffsetStore(query, update)
        assert await s.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == -1
        assert await s.read_offset(MQ1, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 42
        s.update_offset(MQ1, 50, increase_only=True)
        s.update_offset(MQ1, 45, increase_only=True)
        await s.persist_all([MQ1])
        assert broker[MQ1] == 50
        s.remove_offset(MQ1)
        assert await s.read_offset(MQ1, ReadOffsetType.READ_FROM_MEMORY) == -1

    asyncio.run(go())
