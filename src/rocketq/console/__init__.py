"""The web console (rocketmq-dashboard's pages) over the same AdminClient mqadmin uses: ``rocketq console``
on its own, or inside ``rocketq standalone``. See docs/console.md."""

from .config import ConsoleConfig, ConsoleConfigError
from .server import ConsoleServer

__all__ = ["ConsoleConfig", "ConsoleConfigError", "ConsoleServer"]
