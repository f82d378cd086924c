"""An exporter: a prometheus_client registry holding one process's collector, served on /metrics.

A scrape runs in two steps. ``prepare()`` runs on the process's event loop and copies what the collector
needs from the live tables (cheap: dict copies and offset lookups, which are only safe on that thread);
then prometheus_client's encoder runs on a worker thread and calls ``collect()``, which does the
expensive part (reading new consume queue units, formatting) off the loop. Scrapes are serialized by the
HTTP server, so the prepared snapshot is never shared between two of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .http import Authenticator, MetricsHttpServer
from .rpc import RpcLatency
from .settings import MetricsSettings

log = logging.getLogger(__name__)


class SnapshotCollector(Protocol):
    def prepare(self) -> None: ...

    def collect(self): ...


class Exporter:
    def __init__(
        self, settings: MetricsSettings, collector: SnapshotCollector, auth: Authenticator | None, name: str
    ) -> None:
        self.settings = settings
        self.collector = collector
        self.name = name
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)  # type: ignore[arg-type]
        self.server = MetricsHttpServer(
            settings.host,
            settings.port,
            self.render,
            auth=auth,
            max_connections=settings.max_connections,
            request_timeout_s=settings.request_timeout_s,
            name=f"{name} metrics",
        )
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"rocketq-{name}-metrics")

    async def start(self) -> None:
        await self.server.start()
        if self.server.auth is None and self.settings.host not in ("127.0.0.1", "localhost", "::1"):
            log.warning(
                "%s metrics on %s without authentication: anyone who reaches it reads topic and group "
                "names and traffic (turn aclEnable on or set metricsPromExporterTokenFile)",
                self.name,
                self.server.address,
            )
        log.info("%s metrics: http://%s/metrics", self.name, self.server.address)

    async def render(self, accept: str) -> tuple[bytes, str]:
        self.collector.prepare()
        encoder, content_type = choose_encoder(accept)
        body = await asyncio.get_running_loop().run_in_executor(self._pool, encoder, self.registry)
        return body, content_type

    async def close(self) -> None:
        await self.server.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class ProcessMetrics:
    """A broker's or NameServer's metrics: the collector, the endpoint, and (enableRemotingMetrics) the RPC
    hook timing every request, chained after the server's own hook (ACL)."""

    def __init__(
        self,
        server: Any,
        settings: MetricsSettings,
        make_collector: Callable[[RpcLatency | None], SnapshotCollector],
        auth: Authenticator | None,
        name: str,
    ) -> None:
        self.remoting = server
        self.rpc = RpcLatency(server.rpc_hook) if settings.remoting_metrics else None
        self.collector = make_collector(self.rpc)
        self.exporter = Exporter(settings, self.collector, auth, name)

    async def start(self) -> None:
        if self.rpc is not None:
            self.remoting.rpc_hook = self.rpc
        try:
            await self.exporter.start()
        except OSError as exc:
            raise OSError(f"metrics endpoint {self.exporter.server.address}: {exc.strerror or exc}") from None

    @property
    def address(self) -> str:
        return self.exporter.server.address

    async def close(self) -> None:
        await self.exporter.close()
