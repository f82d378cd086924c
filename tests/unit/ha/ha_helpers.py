"""Real stores and a raw TCP peer for the in-process HA tests (127.0.0.1, tmp dirs)."""

from __future__ import annotations

import asyncio
import os

from rocketq.store import FlushDiskType, MessageStore, MessageToStore, StoreConfig
from rocketq.store.config import BrokerRole

SEG = 64 * 1024


def open_store(root, role: BrokerRole = BrokerRole.ASYNC_MASTER, **kw) -> MessageStore:
    base = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commitlog=SEG,
        mapped_file_size_consume_queue=20 * 100,
        max_message_size=16 * 1024,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        max_hash_slot_num=1024,
        max_index_num=4096,
        disk_space_warning_level_ratio=100,
        disk_space_clean_forcibly_ratio=100,
        broker_role=role,
    )
    base.update(kw)
    s = MessageStore(StoreConfig(**base), ("127.0.0.1", 10911))
    s.start()
    return s


def put(store: MessageStore, n: int, size: int = 700, topic: str = "T") -> list:
    out = []
    for i in range(n):
        body = bytes([i % 251]) * size
        m = MessageToStore(topic=topic, queue_id=i % 2, body=body, properties={"TAGS": "a"})
        r = store.put_message(m)
        assert r.ok
        out.append(r)
    return out


def commitlog_files(store: MessageStore) -> dict[str, bytes]:
    return {os.path.basename(mf.path): bytes(mf.view) for mf in store.commit_log.mfq.files}


class RawPeer:
    """A plain TCP client: whatever bytes a test wants to put on the HA wire."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int) -> RawPeer:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        return cls(r, w)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def read(self, n: int, timeout: float = 5.0) -> bytes:
        return await asyncio.wait_for(self.reader.readexactly(n), timeout)

    async def closed(self, timeout: float = 10.0) -> bool:
        """True once the other side closed the connection (EOF or reset)."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), timeout):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            return True
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self.writer.close()


async def until(pred, timeout: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            return pred()
        await asyncio.sleep(0.02)
    return True
