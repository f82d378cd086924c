"""rocketq.store: CommitLog / ConsumeQueue / IndexFile storage engine (synchronous, no networking)."""

from .config import BrokerRole, FlushDiskType, StoreConfig
from .message_store import MessageStore
from .types import (
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

__all__ = [
    "BrokerRole",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageFilter",
    "MessageStore",
    "MessageToStore",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "StoreConfig",
]
