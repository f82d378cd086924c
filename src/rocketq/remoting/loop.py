"""Event loop selection: uvloop when installed (ROCKETQ_NO_UVLOOP=1 disables it)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def _uvloop() -> Any | None:
    if os.environ.get("ROCKETQ_NO_UVLOOP", "") not in ("", "0"):
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def uvloop_enabled() -> bool:
    """True when :func:`run` / :func:`install_event_loop_policy` would use uvloop."""
    return _uvloop() is not None


def install_event_loop_policy() -> bool:
    """Make uvloop the process-wide loop policy if available; returns whether it did."""
    uv = _uvloop()
    if uv is None:
        return False
    asyncio.set_event_loop_policy(uv.EventLoopPolicy())
    return True


def new_event_loop() -> asyncio.AbstractEventLoop:
    uv = _uvloop()
    return uv.new_event_loop() if uv is not None else asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T] | Callable[[], Coroutine[Any, Any, T]], *, debug: bool = False) -> T:
    """``asyncio.run`` on uvloop when available. Accepts a coroutine or a coroutine function."""
    coro = main() if callable(main) else main
    with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
        return runner.run(coro)
