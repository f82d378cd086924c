"""NameServer KV config (namespace -> key -> value), persisted as kvConfig.json like RocketMQ.

File format: {"configTable": {"ns": {"k": "v"}}}. Writes are atomic (temp file, fsync, rename) and run
in a worker thread; concurrent updates coalesce into one write of the latest table.
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
MAX_ENTRIES = 100_000


class KVConfigError(ValueError):
    pass


def _check(name: str, value: str, limit: int) -> None:
    if not value:
        raise KVConfigError(f"{name} must not be empty")
    if len(value) > limit:
        raise KVConfigError(f"{name} longer than {limit} characters")


class KVConfigManager:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.table: dict[str, dict[str, str]] = {}
        self._version = 0  # bumped per change; a writer persists the newest one
        self._written = 0
        self._lock: asyncio.Lock | None = None

    # -- in memory ---------------------------------------------------------------------------
    def put(self, namespace: str, key: str, value: str) -> None:
        _check("namespace", namespace, MAX_NAMESPACE_LEN)
        _check("key", key, MAX_KEY_LEN)
        if len(value) > MAX_VALUE_LEN:
            raise KVConfigError(f"value longer than {MAX_VALUE_LEN} characters")
        ns = self.table.get(namespace)
        if (ns is None or key not in ns) and sum(len(t) for t in self.table.values()) >= MAX_ENTRIES:
            raise KVConfigError(f"KV config is full ({MAX_ENTRIES} entries)")
        self.table.setdefault(namespace, {})[key] = value
        self._version += 1

    def get(self, namespace: str, key: str) -> str | None:
        ns = self.table.get(namespace)
        return None if ns is None else ns.get(key)

    def delete(self, namespace: str, key: str) -> bool:
        ns = self.table.get(namespace)
        if ns is None or key not in ns:
            return False
        del ns[key]
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
        async with self._lock:
            if self._written >= wanted:
                return  # a write that started after our change already covered it
            version = self._version
            data = self.snapshot()
            await asyncio.get_running_loop().run_in_executor(None, self._write, data)
            self._written = version
