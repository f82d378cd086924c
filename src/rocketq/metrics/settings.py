"""The metrics exporter's configuration keys, shared by broker.conf and namesrv.conf.

RocketMQ 5.x names and defaults (``metricsExporterType``, ``metricsPromExporterHost``,
``metricsPromExporterPort`` 5557, ``metricsLabel``) plus rocketq's own bounds and credentials for the
endpoint. Where rocketq differs from RocketMQ:

* ``metricsPromExporterHost`` defaults to 127.0.0.1 (RocketMQ: brokerIP1, the address clients reach): an
  endpoint that names every topic and consumer group is not opened to the network unless asked for.
* ``metricsExporterType`` accepts DISABLE and PROM; OTLP_GRPC and LOG are refused with a clear error
  rather than silently exporting nothing.
* ``enableRemotingMetrics`` (rocketmq_rpc_latency) defaults to false: it is the one series that needs
  work per request on the send path (measured: about +10 % broker CPU per message).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

EXPORTER_TYPES = ("DISABLE", "PROM")
_NOT_BUILT = {
    "OTLP_GRPC": "OTLP export is not built into rocketq; scrape /metrics with metricsExporterType=PROM "
    "(an OpenTelemetry Collector's prometheus receiver can forward it over OTLP)",
    "LOG": "metricsExporterType=LOG is not built into rocketq; use PROM and scrape /metrics",
}

# key -> (type, default); the same names in broker.conf and namesrv.conf
METRICS_KEYS: dict[str, tuple[type, Any]] = {
    "metricsExporterType": (str, "DISABLE"),
    "metricsPromExporterHost": (str, "127.0.0.1"),  # RocketMQ: brokerIP1 (see the module docstring)
    "metricsPromExporterPort": (int, 5557),
    # extra labels on every series, RocketMQ's form: "key:value,key:value"
    "metricsLabel": (str, ""),
    # rocketq: a bearer token (file holding it) accepted besides HTTP basic auth with an ACL account
    "metricsPromExporterTokenFile": (str, ""),
    # rocketq: bounds of the endpoint (concurrent connections; seconds for a whole request to arrive)
    "metricsPromExporterMaxConnections": (int, 16),
    "metricsPromExporterRequestTimeoutSeconds": (int, 10),
    # RocketMQ's switch for rocketmq_rpc_latency; off by default in rocketq (RocketMQ: on): timing every
    # request through the remoting RPC hook costs the send path about 10 % (docs/benchmarks.md)
    "enableRemotingMetrics": (bool, False),
}

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
RESERVED_LABELS = frozenset({"cluster", "node_type", "node_id"})


class MetricsConfigError(ValueError):
    """A bad metrics key; the message names it."""


def parse_labels(text: str) -> dict[str, str]:
    """``metricsLabel``: comma-separated ``key:value`` pairs (RocketMQ's form)."""
    labels: dict[str, str] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not _LABEL_NAME.fullmatch(key) or key.startswith("__") or ":" in value:
            raise MetricsConfigError(f"metricsLabel: {item!r} is not key:value with a Prometheus label name")
        if key in RESERVED_LABELS:
            raise MetricsConfigError(f"metricsLabel: {key!r} is set by the exporter itself")
        labels[key] = value
    return labels


@dataclass(slots=True)
class MetricsSettings:
    exporter_type: str = "DISABLE"
    host: str = "127.0.0.1"
    port: int = 5557
    labels: dict[str, str] = field(default_factory=dict)
    token_file: str = ""
    max_connections: int = 16
    request_timeout_s: float = 10.0
    remoting_metrics: bool = False

    @property
    def enabled(self) -> bool:
        return self.exporter_type == "PROM"

    @classmethod
    def from_config(cls, get: Any) -> MetricsSettings:
        """From a mapping of METRICS_KEYS names (``get(key)`` gives the value or None); validated."""

        def value(key: str) -> Any:
            typ, default = METRICS_KEYS[key]
            raw = get(key)
            if raw is None:
                return default
            if typ is bool:
                if isinstance(raw, bool):
                    return raw
                text = str(raw).strip().lower()
                if text not in ("true", "false"):
                    raise MetricsConfigError(f"{key}: expected true or false, got {raw!r}")
                return text == "true"
            try:
                return typ(str(raw).strip()) if typ is not str else str(raw).strip()
            except ValueError:
                raise MetricsConfigError(f"{key}: expected an integer, got {raw!r}") from None

        kind = value("metricsExporterType").upper()
        if kind in _NOT_BUILT:
            raise MetricsConfigError(f"metricsExporterType={kind}: {_NOT_BUILT[kind]}")
        if kind not in EXPORTER_TYPES:
            raise MetricsConfigError(f"metricsExporterType must be one of DISABLE, PROM (got {kind!r})")
        port = value("metricsPromExporterPort")
        if not 0 <= port < 65536:  # 0: any free port (tests)
            raise MetricsConfigError("metricsPromExporterPort out of range")
        conns = value("metricsPromExporterMaxConnections")
        if not 1 <= conns <= 1024:
            raise MetricsConfigError("metricsPromExporterMaxConnections must be in 1..1024")
        timeout = value("metricsPromExporterRequestTimeoutSeconds")
        if not 1 <= timeout <= 300:
            raise MetricsConfigError("metricsPromExporterRequestTimeoutSeconds must be in 1..300")
        host = value("metricsPromExporterHost") or "127.0.0.1"
        return cls(
            kind, host, port, parse_labels(value("metricsLabel")), value("metricsPromExporterTokenFile"),
            conns, float(timeout), value("enableRemotingMetrics"),
        )  # fmt: skip
