"""The NameServer's metrics (rocketq's addition: RocketMQ's NameServer exports none).

The same keys as the broker's in namesrv.conf (metricsExporterType=PROM, metricsPromExporterPort, ...).
Series: ``rocketmq_rpc_latency`` (as the broker's, ``node_type="namesrv"``), and rocketq's own gauges of
the route registry and the remoting guard. ``node_id`` is the NameServer's listen address.
With ``authenticationEnabled=true`` the endpoint takes the NameServer's configured credentials
(innerClientAuthenticationCredentials, initAuthenticationUser) as HTTP basic auth.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .exporter import ProcessMetrics
from .rpc import RpcLatency
from .settings import MetricsSettings


class NamesrvCollector:
    def __init__(self, ctl: Any, settings: MetricsSettings, rpc: RpcLatency | None) -> None:
        self.ctl = ctl
        self.settings = settings
        self.rpc = rpc
        self._snap: dict[str, Any] | None = None

    def prepare(self) -> None:
        ctl = self.ctl
        routes = ctl.routes
        guard = ctl.server.guard
        self._snap = {
            "labels": {**self.settings.labels, "node_type": "namesrv", "node_id": ctl.address},
            "brokers": len(routes.broker_live_table),
            "broker_names": len(routes.broker_addr_table),
            "clusters": len(routes.cluster_addr_table),
            "topics": len(routes.topic_queue_table),
            "guard": dict(guard.events.total),
            "connections": guard.connections,
            "rpc": self.rpc.snapshot() if self.rpc is not None else [],
        }

    def collect(self) -> Iterator[Any]:
        snap = self._snap
        if snap is None:
            return
        labels = snap["labels"]
        names, base = list(labels), list(labels.values())
        for name, doc, key in (
            ("rocketq_namesrv_live_brokers", "Broker addresses registered and not expired", "brokers"),
            ("rocketq_namesrv_broker_names", "Broker names (master and slaves count once)", "broker_names"),
            ("rocketq_namesrv_clusters", "Clusters", "clusters"),
            ("rocketq_namesrv_topics", "Topics with a route", "topics"),
            ("rocketq_remoting_connections", "Open client connections", "connections"),
        ):
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(base, snap[key])
            yield g
        c = CounterMetricFamily(
            "rocketq_remoting_guard_events",
            "Connections the remoting guard refused or closed, by action and limit",
            labels=[*names, "action", "limit"],
        )
        for kind, n in sorted(snap["guard"].items()):
            action, sep, limit = kind.partition(":")
            if sep:
                c.add_metric([*base, action.strip(), limit.strip()], n)
        yield c
        if self.rpc is not None:
            yield from RpcLatency.families(snap["rpc"], labels)


class NamesrvMetrics(ProcessMetrics):
    def __init__(self, ctl: Any, settings: MetricsSettings, auth: Any) -> None:
        super().__init__(
            ctl.server, settings, lambda rpc: NamesrvCollector(ctl, settings, rpc), auth, "namesrv"
        )
