"""BrokerContext: what request processors and broker services need from the broker that runs them.

BrokerController (controller.py) builds the processors and services and hands itself over as their
context; they see it only through this protocol, so controller.py imports them and they never import it
(no import cycle, and a processor's dependencies are listed in one place). A processor that needs more of
the broker adds the attribute here.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from rocketq.remoting import RemotingClient, RemotingServer

from .client_manager import ClientManager
from .config import BrokerConfig
from .delay import DelayLevels
from .flush_waiter import FlushWaiter
from .long_polling import PullRequestHoldService
from .offset_manager import ConsumerOffsetManager
from .read_acl import ReadGuard
from .stats import BrokerStats
from .subscription_manager import SubscriptionGroupManager
from .topic_manager import TopicConfigManager


class BrokerContext(Protocol):
    cfg: BrokerConfig
    broker_perm: int  # brokerPermission as applied now (UPDATE_BROKER_CONFIG may change it)
    boot_timestamp: int  # ms
    store: Any  # rocketq.store.MessageStore once started
    topics: TopicConfigManager
    subscriptions: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    clients: ClientManager
    delay_levels: DelayLevels
    stats: BrokerStats
    server: RemotingServer
    hold: PullRequestHoldService
    flush_waiter: FlushWaiter | None  # SYNC_FLUSH acknowledgements wait here; None under ASYNC_FLUSH
    schedule: Any  # schedule.ScheduleMessageService (it is a context user itself)
    reads: ReadGuard  # aclEnable: reads authorized by the stored message's topics (read_acl.py)
    loop: asyncio.AbstractEventLoop  # the broker's event loop, once started
    _tasks: list[asyncio.Task[Any]]  # periodic tasks cancelled at shutdown
    # replication (ha/): replication.Replication once started (None before), a slave's SlaveSynchronize
    replication: Any
    slave_sync: Any
    client: RemotingClient  # outgoing calls (NameServers, a slave's master)
    namesrv: Any  # namesrv_api.NamesrvApi
    bind_host: str
    ha_any_port: bool  # listenPort 0 without haListenPort: the HA port is any free one

    @property
    def broker_addr(self) -> str: ...

    def apply_config(self, changes: dict[str, str]) -> None: ...

    async def register_now(self) -> None: ...
