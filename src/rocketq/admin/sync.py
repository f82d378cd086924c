"""MQAdminExt: a thread-safe synchronous facade over :class:`AdminClient` (for the console, scripts, Spark).

It owns a private event loop in a daemon thread; every AdminClient coroutine method is available as a
blocking method with the same name and arguments.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterable
from typing import Any

from rocketq.remoting import new_event_loop

from .client import AdminClient


class MQAdminExt:
    def __init__(self, namesrv: str | Iterable[str], *, timeout_s: float = 5.0, rpc_hook: Any = None) -> None:
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rocketq-admin", daemon=True)
        self._thread.start()
        self._admin: AdminClient = self._call(self._make(namesrv, timeout_s, rpc_hook))

    @staticmethod
    async def _make(namesrv: str | Iterable[str], timeout_s: float, rpc_hook: Any) -> AdminClient:
        return AdminClient(namesrv, timeout_s=timeout_s, rpc_hook=rpc_hook)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._admin, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._call(attr(*args, **kwargs))

        blocking.__name__ = name
        return blocking

    def shutdown(self) -> None:
        if self._loop.is_closed():
            return
        self._call(self._admin.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> MQAdminExt:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
