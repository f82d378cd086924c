"""The client names rocketq and rocketq.aio export: one list, readable without importing the client."""

from __future__ import annotations

# name -> the rocketq.client module that defines it (the asyncio class).
CLIENT_NAMES: dict[str, str] = {
    "ClientConfig": "instance",
    "ConsumeConcurrentlyContext": "consume",
    "ConsumeFromWhere": "message",
    "ConsumeOrderlyContext": "consume",
    "ConsumeOrderlyResult": "message",
    "ConsumeResult": "message",
    "LitePullConsumer": "lite_pull",
    "LocalTransactionState": "transaction",
    "MQBrokerError": "message",
    "MQClientError": "message",
    "Message": "message",
    "MessageExt": "message",
    "MessageModel": "message",
    "MessageQueue": "message",
    "MessageSelector": "subscription",
    "Producer": "producer",
    "PushConsumer": "consumer",
    "SendResult": "message",
    "SendStatus": "message",
    "TransactionProducer": "transaction",
    "TransactionSendResult": "transaction",
    "create_reply_message": "message",
}
# rocketq (synchronous) exports these from rocketq.client.sync instead.
SYNC_NAMES = frozenset({"LitePullConsumer", "Producer", "PushConsumer", "TransactionProducer"})
