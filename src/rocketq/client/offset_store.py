"""Consumer offset stores: remote (broker-kept, clustering) and local file (broadcasting)."""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import orjson

from rocketq.atomic_file import replace_atomically

from .message import MessageQueue

log = logging.getLogger(__name__)


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetStore:
    """Offsets in memory; subclasses say where they persist. ``-1`` = no offset known."""

    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        pass

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if offset < 0:
            return
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            off = self.table.get(mq)
            if off is not None:
                return off
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        off = await self._read_from_store(mq)
        if off >= 0:
            self.update_offset(mq, off)
        return off

    async def _read_from_store(self, mq: MessageQueue) -> int:
        return -1

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        pass

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    def remove_offset(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


# (mq) -> offset (-1 when the broker has none); (mq, offset) -> None
QueryFn = Callable[[MessageQueue], Awaitable[int]]
UpdateFn = Callable[[MessageQueue, int], Awaitable[None]]


class RemoteBrokerOffsetStore(OffsetStore):
    """Clustering: the broker keeps the group's offsets (QUERY/UPDATE_CONSUMER_OFFSET)."""

    def __init__(self, query: QueryFn, update: UpdateFn) -> None:
        super().__init__()
        self._query = query
        self._update = update

    async def _read_from_store(self, mq: MessageQueue) -> int:
        return await self._query(mq)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        failed_brokers: set[str] = set()
        for mq, off in list(self.table.items()):
            if mq in wanted and mq.broker_name not in failed_brokers:
                try:
                    await self._update(mq, off)
                except Exception as exc:  # retried in 5 s; skip the broker's other queues meanwhile
                    failed_brokers.add(mq.broker_name)
                    log.warning("persist offset %s=%d failed: %s", mq, off, exc)


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting: offsets in ``<root>/<clientId>/<group>/offsets.json`` (atomic replace)."""

    def __init__(self, client_id: str, group: str, root: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        base = (
            Path(root)
            if root
            else Path(os.environ.get("ROCKETQ_OFFSETS_DIR", Path.home() / ".rocketq_offsets"))
        )
        safe_cid = client_id.replace(":", "_").replace("/", "_")
        self.path = base / safe_cid / group / "offsets.json"
        self._lock = asyncio.Lock()

    def _read_file(self) -> dict[MessageQueue, int]:
        for p in (self.path, self.path.with_suffix(".json.bak")):
            try:
                data = orjson.loads(p.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            out = {}
            for row in data.get("offsetTable", []):
                out[MessageQueue(row["topic"], row["brokerName"], int(row["queueId"]))] = int(row["offset"])
            return out
        return {}

    async def load(self) -> None:
        self.table.update(await asyncio.to_thread(self._read_file))

    async def _read_from_store(self, mq: MessageQueue) -> int:
        stored = await asyncio.to_thread(self._read_file)
        return stored.get(mq, -1)

    def _write_file(self, rows: list[dict[str, object]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = orjson.dumps({"offsetTable": rows}, option=orjson.OPT_INDENT_2)
        replace_atomically(self.path, data, prefix=".offsets.", backup=self.path.with_suffix(".json.bak"))

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        rows = [{**mq.to_json(), "offset": off} for mq, off in sorted(self.table.items()) if mq in wanted]
        async with self._lock:
            await asyncio.to_thread(self._write_file, rows)
