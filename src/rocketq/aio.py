"""rocketq.aio: the asyncio client — same names as rocketq, with coroutine methods."""

from rocketq.client import (
    ClientConfig,
    ConsumeFromWhere,
    ConsumeOrderlyResult,
    ConsumeResult,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    Producer,
    PushConsumer,
    SendResult,
    SendStatus,
)

__all__ = [
    "ClientConfig",
    "ConsumeFromWhere",
    "ConsumeOrderlyResult",
    "ConsumeResult",
    "LitePullConsumer",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "Producer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
]
