"""The web console (rocketmq-dashboard's pages) over the same AdminClient mqadmin uses: ``rocketq console``
on its own, or inside ``rocketq standalone``. See docs/console.md."""

from typing import Any

from .config import ConsoleConfig, ConsoleConfigError

__all__ = ["ConsoleConfig", "ConsoleConfigError", "ConsoleServer"]


def __getattr__(name: str) -> Any:  # the server (aiohttp, the pages) loads only when it is used
    if name == "ConsoleServer":
        from .server import ConsoleServer

        return ConsoleServer
    raise AttributeError(name)
