"""rocketq.client: the Python RocketMQ client (asyncio core; synchronous facade in rocketq)."""

from .allocate import (
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
    make_by_config,
    make_consistent_hash,
)
from .consume import ConsumeConcurrentlyContext, ConsumeOrderlyContext
from .consumer import PushConsumer
from .instance import ClientConfig, set_producer_factory
from .lite_pull import LitePullConsumer
from .message import (
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
from .producer import Producer
from .subscription import MessageSelector
from .transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

set_producer_factory(Producer)  # the instance and the trace dispatcher make producers without importing them

__all__ = [
    "ClientConfig",
    "ConsumeConcurrentlyContext",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyResult",
    "ConsumeResult",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "allocate_consistent_hash",
    "create_reply_message",
    "make_by_config",
    "make_consistent_hash",
]
