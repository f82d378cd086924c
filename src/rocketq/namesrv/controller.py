"""NamesrvController: the NameServer's server, registry, KV store and expiry scan, startable in-process."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from rocketq.dirlock import DirLock
from rocketq.remoting import RemotingServer
from rocketq.remoting.acl_signature import Credentials

from .auth import NamesrvAuthHook, parse_whitelist
from .config import NamesrvConfig
from .kvconfig import KVConfigManager
from .processor import NamesrvProcessor
from .route_info import RouteInfoManager

if TYPE_CHECKING:
    from rocketq.metrics.namesrv import NamesrvMetrics

log = logging.getLogger(__name__)

BOOT_LINE = "The Name Server boot success. serializeType=JSON"


def auth_hook_of(cfg: NamesrvConfig) -> NamesrvAuthHook:
    """The authentication / replay / audit hook for this config (ValueError for bad credentials)."""
    creds = [
        c
        for c in (
            Credentials.parse(cfg.inner_client_authentication_credentials),
            Credentials.parse(cfg.init_authentication_user, "initAuthenticationUser"),
        )
        if c is not None
    ]
    return NamesrvAuthHook(
        cfg.authentication_enabled,
        creds,
        whitelist=parse_whitelist(cfg.authentication_whitelist),
        replay_window_s=cfg.auth_replay_window_s,
    )


class NamesrvController:
    def __init__(self, config: NamesrvConfig | None = None) -> None:
        self.config = config or NamesrvConfig()
        self.routes = RouteInfoManager(broker_channel_expired_s=self.config.broker_channel_expired_s)
        self.kv = KVConfigManager(
            self.config.kv_path,
            max_entries=self.config.kv_config_max_entries,
            max_bytes=self.config.kv_config_max_bytes,
        )
        self.server = RemotingServer(
            self.config.bind_address,
            self.config.listen_port,
            idle_timeout_s=self.config.server_channel_max_idle_s,
            limits=self.config.server_limits(),
            name="namesrv",
        )
        self.processor = NamesrvProcessor(self.routes, self.kv, self.config)
        self.server.rpc_hook = auth_hook_of(self.config)
        self.processor.register(self.server)
        self._scan_task: asyncio.Task[None] | None = None
        self.metrics: NamesrvMetrics | None = None  # with metricsExporterType=PROM
        # one NameServer per KV config: a second one would overwrite the first one's puts
        kv = os.path.abspath(self.config.kv_path)
        self.home_lock = DirLock(os.path.dirname(kv), os.path.basename(kv) + ".lock")

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        self.home_lock.acquire()  # StoreLocked ("Lock failed, MQ already started") before the KV is read
        await asyncio.get_running_loop().run_in_executor(None, self.kv.load)
        await self.start_metrics()
        await self.server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop())

    async def start_metrics(self) -> None:
        """metricsExporterType=PROM in namesrv.conf: /metrics (rocketq/metrics/namesrv.py)."""
        settings = self.config.metrics_settings()
        if not settings.enabled:
            return
        from rocketq.metrics.auth import make_auth
        from rocketq.metrics.namesrv import NamesrvMetrics

        cfg = self.config
        creds = [
            c
            for c in (
                Credentials.parse(cfg.inner_client_authentication_credentials),
                Credentials.parse(cfg.init_authentication_user, "initAuthenticationUser"),
            )
            if c is not None
        ]
        accounts = {c.access_key: (c.secret_key, True) for c in creds}
        auth = make_auth(settings.token_file, (lambda: accounts) if cfg.authentication_enabled else None)
        self.metrics = NamesrvMetrics(self, settings, auth)
        await self.metrics.start()

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval_s)
            for addr, channel in self.routes.scan_not_active_broker():
                log.warning(
                    "broker %s expired: no registration for %gs", addr, self.config.broker_channel_expired_s
                )
                if channel is not None and hasattr(channel, "close"):
                    channel.close()

    async def close(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            self._scan_task = None
        await self.server.close()
        if self.metrics is not None:
            await self.metrics.close()
            self.metrics = None
        if not self.home_lock.held:
            return  # never started: the KV file is someone else's
        await self.kv.persist()
        self.home_lock.release()
