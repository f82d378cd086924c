"""rocketq: Apache RocketMQ's messaging model, wire-compatible, built in Python.

The synchronous client is importable from here (``from rocketq import Producer, Message``); the asyncio
client lives in ``rocketq.aio``. Names load lazily so the servers do not import the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_MESSAGE_NAMES = {
    "ConsumeFromWhere",
    "ConsumeOrderlyResult",
    "ConsumeResult",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MQBrokerError",
    "MQClientError",
    "SendResult",
    "SendStatus",
    "create_reply_message",
}
_TRANSACTION_NAMES = {"LocalTransactionState", "TransactionSendResult"}
_CONSUMER_NAMES = {"ClientConfig", "ConsumeConcurrentlyContext", "ConsumeOrderlyContext", "MessageSelector"}
_SYNC_NAMES = {"Producer", "PushConsumer", "LitePullConsumer", "TransactionProducer"}

__all__ = [
    "__version__",
    *sorted(_MESSAGE_NAMES),
    *sorted(_SYNC_NAMES),
    *sorted(_TRANSACTION_NAMES),
    *sorted(_CONSUMER_NAMES),
]

if TYPE_CHECKING:
    from rocketq.client.consume import ConsumeConcurrentlyContext, ConsumeOrderlyContext  # noqa: F401
    from rocketq.client.instance import ClientConfig  # noqa: F401
    from rocketq.client.message import (  # noqa: F401
        ConsumeFromWhere,
        ConsumeOrderlyResult,
        ConsumeResult,
        Message,
        MessageExt,
        MessageModel,
        MessageQueue,
        MQBrokerError,
        MQClientError,
        SendResult,
        SendStatus,
        create_reply_message,
    )
    from rocketq.client.subscription import MessageSelector  # noqa: F401
    from rocketq.client.sync import LitePullConsumer, Producer, PushConsumer, TransactionProducer  # noqa: F401
    from rocketq.client.transaction import LocalTransactionState, TransactionSendResult  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in _MESSAGE_NAMES:
        from rocketq.client import message

        return getattr(message, name)
    if name in _CONSUMER_NAMES:
        from rocketq import client

        return getattr(client, name)
    if name in _TRANSACTION_NAMES:
        from rocketq.client import transaction

        return getattr(transaction, name)
    if name in _SYNC_NAMES:
        from rocketq.client import sync

        return getattr(sync, name)
    raise AttributeError(f"module 'rocketq' has no attribute {name!r}")
