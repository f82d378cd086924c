"""rocketq: Apache RocketMQ's messaging model, wire-compatible, built in Python.

The synchronous client is importable from here (``from rocketq import Producer, Message``); the asyncio
client lives in ``rocketq.aio``. Names load lazily so the servers do not import the client.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from rocketq._public import CLIENT_NAMES, SYNC_NAMES

__version__ = "0.1.0"

__all__ = ["__version__", *sorted(CLIENT_NAMES)]

if TYPE_CHECKING:
    from rocketq.client import *  # noqa: F403
    from rocketq.client.sync import LitePullConsumer, Producer, PushConsumer, TransactionProducer  # noqa: F401


def __getattr__(name: str) -> Any:
    module = CLIENT_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'rocketq' has no attribute {name!r}")
    return getattr(import_module(f"rocketq.client.{'sync' if name in SYNC_NAMES else module}"), name)
