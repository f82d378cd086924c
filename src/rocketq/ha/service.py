"""HAService: what the broker drives for replication, whatever the role.

Master roles (ASYNC_MASTER, SYNC_MASTER) listen on the HA port (ha/master.py); SYNC_MASTER sends wait for the
slaves' acknowledgements (ha/waiter.py). A SLAVE follows its master (ha/slave.py) and does not listen.

SYNC_MASTER, per send (RocketMQ 4.x semantics, with 5.x's replica counts):
- ``needed`` slave acknowledgements: inSyncReplicas - 1 (inSyncReplicas counts the master), at least one, so
  the default inSyncReplicas=1 is the seed's sync double write; allAckInSyncStateSet=true: every slave in sync
  at the time of the send;
- fewer slaves in sync (connected and within haMaxGapNotInSync of the send) than needed: SLAVE_NOT_AVAILABLE
  at once (the message is stored on the master);
- not acknowledged within slaveTimeout: FLUSH_SLAVE_TIMEOUT (stored on the master);
- fewer in-sync replicas (master included) than minInSyncReplicas before the put: IN_SYNC_REPLICAS_NOT_ENOUGH
  (not stored).
The controller mode of 5.x (epochs, AutoSwitch frames, SyncStateSet) is a separate service built on the same
pieces: it would add an epoch file next to the store and its own frame readers in ha/frames.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from . import auth
from .master import HAConfig, HAServer
from .slave import HAClient
from .waiter import ReplicaWaiter

log = logging.getLogger(__name__)

SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class HAService:
    def __init__(
        self,
        store: Any,
        role: str,
        cfg: HAConfig,
        *,
        slave_timeout_s: float = 3.0,
        in_sync_replicas: int = 1,
        min_in_sync_replicas: int = 1,
        all_ack_in_sync: bool = False,
        master_auth: auth.MasterAuth | None = None,
        credentials: auth.Credentials | None = None,
    ) -> None:
        self.store = store
        self.role = role
        self.cfg = cfg
        self.is_slave = role == "SLAVE"
        self.sync_master = role == "SYNC_MASTER"
        self.in_sync_replicas = in_sync_replicas
        self.min_in_sync_replicas = min_in_sync_replicas
        self.all_ack_in_sync = all_ack_in_sync
        self.slave_timeout_s = slave_timeout_s
        self.server: HAServer | None = None
        self.client: HAClient | None = None
        self.waiter: ReplicaWaiter | None = None
        self._master_auth = master_auth
        self.credentials = credentials  # a slave's, for the HA handshake and its metadata calls
        self.not_available = 0  # sends answered SLAVE_NOT_AVAILABLE
        self.on_master_changed: Callable[[str | None], None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        if self.is_slave:
            self.client = HAClient(self.store.replica_appender(), self.cfg, self.credentials)
            self.client.start()
            return
        if self.sync_master:
            self.waiter = ReplicaWaiter(loop, self.slave_timeout_s)
        self.server = HAServer(self.store, self.cfg, self._master_auth, self._on_acks)
        await self.server.start(host, port)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self.server is not None:
            await self.server.close()
        if self.waiter is not None:
            self.waiter.close()

    @property
    def port(self) -> int:
        return self.server.port if self.server is not None else 0

    # -- master ------------------------------------------------------------------------------------
    def notify(self) -> None:
        s = self.server
        if s is not None and s.connections:
            s.notify()

    def _on_acks(self, acks: list[int]) -> None:
        if self.waiter is not None:
            self.waiter.advance(acks)

    def in_sync_replica_count(self) -> int:
        """The master plus the slaves within haMaxGapNotInSync of its log's end."""
        s = self.server
        return 1 + (s.in_sync_count(self.store.commit_log.max_offset) if s is not None else 0)

    def enough_replicas(self) -> bool:
        """SYNC_MASTER, before the put: minInSyncReplicas holds (else IN_SYNC_REPLICAS_NOT_ENOUGH)."""
        return self.min_in_sync_replicas <= 1 or self.in_sync_replica_count() >= self.min_in_sync_replicas

    def wait_replicated(self, end_offset: int, callback: Callable[[bool], None]) -> str | None:
        """SYNC_MASTER, after the put: callback(acknowledged) once enough slaves hold [.., end_offset), or
        after slaveTimeout; returns SLAVE_NOT_AVAILABLE instead (no callback) when too few are in sync."""
        s = self.server
        w = self.waiter
        if s is None or w is None:
            return SLAVE_NOT_AVAILABLE
        in_sync = s.in_sync_count(end_offset)
        needed = in_sync if self.all_ack_in_sync else max(self.in_sync_replicas - 1, 1)
        if in_sync < needed or in_sync == 0:
            self.not_available += 1
            return SLAVE_NOT_AVAILABLE
        w.add(end_offset, needed, s.acks(), callback)
        return None

    def set_slave_timeout(self, timeout_s: float) -> None:
        self.slave_timeout_s = timeout_s
        if self.waiter is not None:
            self.waiter.set_timeout(timeout_s)

    # -- slave -------------------------------------------------------------------------------------
    def update_master(self, ha_addr: str | None, master_addr: str | None, pin: bool = False) -> None:
        c = self.client
        if c is None:
            return
        before = c.master_addr
        c.update_master(ha_addr, master_addr, pin)
        if c.master_addr != before and self.on_master_changed is not None:
            self.on_master_changed(c.master_addr)

    @property
    def master_addr(self) -> str | None:
        return self.client.master_addr if self.client is not None else None

    # -- status (GET_BROKER_HA_STATUS) -------------------------------------------------------------
    def runtime_info(self) -> dict[str, Any]:
        """RocketMQ's HARuntimeInfo (haStatus), with rocketq's extra fields."""
        info: dict[str, Any] = {
            "master": not self.is_slave,
            "brokerRole": self.role,
            "masterCommitLogMaxOffset": self.store.commit_log.max_offset,
            "inSyncSlaveNums": 0,
            "haConnectionInfo": [],
            "haClientRuntimeInfo": {},
        }
        if self.server is not None:
            info.update(self.server.status())
        if self.waiter is not None:
            info["syncWaiting"] = len(self.waiter)
            info["syncReleased"] = self.waiter.released
            info["syncTimedOut"] = self.waiter.timed_out
            info["slaveNotAvailable"] = self.not_available
        if self.client is not None:
            info["haClientRuntimeInfo"] = self.client.info()
        return info
