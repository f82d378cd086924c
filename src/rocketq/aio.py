"""rocketq.aio: the asyncio client — same names as rocketq, with coroutine methods."""

from rocketq._public import CLIENT_NAMES
from rocketq.client import *  # noqa: F403  (the names below are all exported by rocketq.client)

__all__ = sorted(CLIENT_NAMES)
