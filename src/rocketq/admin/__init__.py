"""mqadmin: RocketMQ's admin commands (``rocketq admin``) and the reusable AdminClient behind them."""

from .client import AdminClient, SubscriptionGroupConfig, TopicConfig
from .errors import AdminError, NamesrvUnreachableError, TopicNotFoundError
from .sync import MQAdminExt

__all__ = [
    "AdminClient",
    "AdminError",
    "MQAdminExt",
    "NamesrvUnreachableError",
    "SubscriptionGroupConfig",
    "TopicConfig",
    "TopicNotFoundError",
]
