"""Atomic JSON config files under <storePathRootDir>/config (write tmp + fsync + rename).

Writes run on one worker thread (so they never block the event loop and land in order); shutdown
writes synchronously.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson

from rocketq.atomic_file import replace_atomically
from rocketq.protocol import lenient_json

log = logging.getLogger(__name__)

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocketq-config")
        return _executor


def write_atomic(path: str, data: bytes) -> None:
    """The file replaced whole, the previous good copy kept as .bak, like RocketMQ's."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    replace_atomically(path, data, prefix=os.path.basename(path) + ".", mode=0o644, backup=path + ".bak")


def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run fn(*args) on the config thread, after every write submitted before it."""
    return _pool().submit(fn, *args)


def read_json(path: str) -> Any | None:
    """The parsed file, falling back to .bak when the file is missing or corrupt; None if neither."""
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            continue
        if not raw.strip():
            continue
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            try:
                return lenient_json.loads(raw)
            except Exception:
                log.error("config file %s is corrupt; trying the backup", candidate)
    return None


class ConfigFile:
    """One persisted JSON document. ``snapshot()`` must be called on the loop thread (it reads live
    state); the encoded bytes are written on the config thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._inflight: Future[None] | None = None

    def load(self) -> Any | None:
        return read_json(self.path)

    def persist_async(self, obj: Any) -> Future[None]:
        data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
        fut = _pool().submit(write_atomic, self.path, data)
        fut.add_done_callback(self._log_failure)
        self._inflight = fut
        return fut

    async def persist(self, obj: Any) -> None:
        await asyncio.wrap_future(self.persist_async(obj))

    async def written(self) -> None:
        """Wait for the newest persist_async to be on disk (the writes run in order on one thread, so it
        holds every earlier snapshot too); raises what it raised."""
        if self._inflight is not None:
            await asyncio.wrap_future(self._inflight)

    def persist_sync(self, obj: Any) -> None:
        if self._inflight is not None:
            try:
                self._inflight.result(timeout=10)
            except Exception:
                pass
        write_atomic(self.path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))

    def _log_failure(self, fut: Future[None]) -> None:
        exc = fut.exception()
        if exc is not None:
            log.error("persisting %s failed: %s", self.path, exc)
