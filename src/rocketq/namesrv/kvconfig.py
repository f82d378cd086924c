"""NameServer KV config (namespace -> key -> value), persisted as kvConfig.json like RocketMQ.

File format: {"configTable": {"ns": {"k": "v"}}}. Writes are atomic (temp file, fsync, rename) and run
in a worker thread; concurrent updates coalesce into one write of the latest table, and writes start at most
every ``min_write_interval_s`` (the changes made meanwhile ride on the next one), so a flood of puts costs at
most one whole-file write per interval. The table is bounded: ``max_entries`` entries and ``max_bytes``
bytes of names and values in total (namesrv.conf ``kvConfigMaxEntries`` / ``kvConfigMaxBytes``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import orjson

from rocketq.atomic_file import replace_atomically

log = logging.getLogger(__name__)

MAX_NAMESPACE_LEN = 255
MAX_KEY_LEN = 1024
MAX_VALUE_LEN = 64 * 1024
MAX_ENTRIES = 10_000
MAX_BYTES = 8 * 1024 * 1024
MIN_WRITE_INTERVAL_S = 0.1


class KVConfigError(ValueError):
    pass


def _check(name: str, value: str, limit: int) -> None:
    if not value:
        raise KVConfigError(f"{name} must not be empty")
    if len(value) > limit:
        raise KVConfigError(f"{name} longer than {limit} characters")


class KVConfigManager:
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
        min_write_interval_s: float = MIN_WRITE_INTERVAL_S,
    ) -> None:
        self.path = Path(path)
        self.table: dict[str, dict[str, str]] = {}
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.min_write_interval_s = min_write_interval_s
        self.entries = 0
        self.bytes = 0  # UTF-8 bytes of every namespace, key and value (what the file grows with)
        self._version = 0  # bumped per change; a writer persists the newest one
        self._written = 0
        self._last_write = -1e18
        self.writes = 0
        self._lock: asyncio.Lock | None = None

    # -- in memory ---------------------------------------------------------------------------
    def put(self, namespace: str, key: str, value: str) -> None:
        _check("namespace", namespace, MAX_NAMESPACE_LEN)
        _check("key", key, MAX_KEY_LEN)
        if len(value) > MAX_VALUE_LEN:
            raise KVConfigError(f"value longer than {MAX_VALUE_LEN} characters")
        ns = self.table.get(namespace)
        old = None if ns is None else ns.get(key)
        if old is None and self.entries >= self.max_entries:
            raise KVConfigError(f"KV config is full: kvConfigMaxEntries={self.max_entries} entries")
        grow = _size(value) - (_size(old) if old is not None else -(_size(namespace) + _size(key)))
        if grow > 0 and self.bytes + grow > self.max_bytes:
            raise KVConfigError(
                f"KV config is full: kvConfigMaxBytes={self.max_bytes} bytes ({self.bytes} used, "
                f"this entry needs {grow} more)"
            )
        self.table.setdefault(namespace, {})[key] = value
        self.bytes += grow
        if old is None:
            self.entries += 1
        self._version += 1

    def get(self, namespace: str, key: str) -> str | None:
        ns = self.table.get(namespace)
        return None if ns is None else ns.get(key)

    def delete(self, namespace: str, key: str) -> bool:
        ns = self.table.get(namespace)
        if ns is None or key not in ns:
            return False
        value = ns.pop(key)
        self.bytes -= _size(namespace) + _size(key) + _size(value)
        self.entries -= 1
        if not ns:
            del self.table[namespace]
        self._version += 1
        return True

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        ns = self.table.get(namespace)
        return dict(ns) if ns else None

    # -- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        """Read the file if it exists (blocking: call at startup, before serving)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            obj = orjson.loads(raw)
            table = obj.get("configTable", {}) if isinstance(obj, dict) else {}
            self.table = {
                str(ns): {str(k): str(v) for k, v in kv.items()}
                for ns, kv in table.items()
                if isinstance(kv, dict) and kv
            }
        except (orjson.JSONDecodeError, AttributeError) as exc:
            # Keep the broken file for an operator; start empty rather than refuse to boot.
            log.error("ignoring unreadable %s: %s", self.path, exc)
            self.table = {}
        self.entries = sum(len(t) for t in self.table.values())
        self.bytes = sum(
            _size(ns) + _size(k) + _size(v) for ns, t in self.table.items() for k, v in t.items()
        )
        if self.entries > self.max_entries or self.bytes > self.max_bytes:
            # a file from before the limits (or edited by hand) is served as it is; puts wait for room
            log.warning(
                "%s holds %d entries / %d bytes, over kvConfigMaxEntries=%d / kvConfigMaxBytes=%d",
                self.path,
                self.entries,
                self.bytes,
                self.max_entries,
                self.max_bytes,
            )

    def _write(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(self.path, data, prefix=self.path.name + ".", mode=0o644)

    def snapshot(self) -> bytes:
        return orjson.dumps({"configTable": self.table}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    def persist_sync(self) -> None:
        self._write(self.snapshot())
        self._written = self._version

    async def persist(self) -> None:
        """Write the table in a worker thread; returns once a write covering this call's state is done."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        wanted = self._version
        loop = asyncio.get_running_loop()
        async with self._lock:
            if self._written >= wanted:
                return  # a write that started after our change already covered it
            wait = self._last_write + self.min_write_interval_s - loop.time()
            if wait > 0:  # changes made while we wait ride on this write
                await asyncio.sleep(wait)
            version = self._version
            data = self.snapshot()
            self._last_write = loop.time()
            await loop.run_in_executor(None, self._write, data)
            self._written = version
            self.writes += 1


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
