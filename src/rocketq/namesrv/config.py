"""NameServer configuration: RocketMQ's property names where they exist, plus test-friendly intervals."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.metrics.settings import METRICS_KEYS, MetricsSettings
from rocketq.remoting.limits import LIMIT_KEYS, ServerLimits


def default_home() -> str:
    return str(Path.home() / ".rocketq")


@dataclass(slots=True)
class NamesrvConfig:
    listen_port: int = 9876
    bind_address: str = "127.0.0.1"
    home: str = field(default_factory=default_home)  # like Java's user.home: KV lives in <home>/namesrv/
    kv_config_path: str | None = None
    broker_channel_expired_s: float = 120.0
    scan_not_active_broker_interval_s: float = 10.0
    server_channel_max_idle_s: float = 120.0
    # RocketMQ defaults this to false; we answer orderTopicConf whenever the ORDER_TOPIC_CONFIG KV
    # namespace has the topic (an operator who puts it there wants it used).
    order_message_enable: bool = True
    kv_config_max_entries: int = 10_000  # rocketq: bounds of the KV config (namesrv/kvconfig.py)
    kv_config_max_bytes: int = 8 * 1024 * 1024
    # authentication of state-changing requests (namesrv/auth.py; RocketMQ 5's key names)
    authentication_enabled: bool = False
    inner_client_authentication_credentials: str = ""  # {"accessKey": .., "secretKey": ..}: brokers sign
    init_authentication_user: str = ""  # {"username": .., "password": ..}: an operator's (mqadmin)
    authentication_whitelist: str = ""  # request codes let through unsigned, comma-separated
    auth_replay_window_s: int = 120  # rocketq: a signed change seen again within this is refused (0: off)
    # remoting limits (serverFrameMaxLength, serverMaxBufferedBytes, ...: remoting/limits.py), as given
    limit_props: dict[str, str] = field(default_factory=dict)
    # the metrics exporter's keys (metricsExporterType=PROM, ...: rocketq/metrics/settings.py), as given
    metrics_props: dict[str, str] = field(default_factory=dict)

    def metrics_settings(self) -> MetricsSettings:
        return MetricsSettings.from_config(self.metrics_props.get)

    def server_limits(self) -> ServerLimits:
        return ServerLimits.from_config(self.limit_props.get)

    @property
    def kv_path(self) -> str:
        return self.kv_config_path or str(Path(self.home) / "namesrv" / "kvConfig.json")

    def apply_env(self, env: dict[str, str] | None = None) -> None:
        """ROCKETQ_NAMESRV_BROKER_EXPIRE_S / _SCAN_INTERVAL_S / _IDLE_TIMEOUT_S (seconds)."""
        env = dict(os.environ) if env is None else env
        for var, attr in (
            ("ROCKETQ_NAMESRV_BROKER_EXPIRE_S", "broker_channel_expired_s"),
            ("ROCKETQ_NAMESRV_SCAN_INTERVAL_S", "scan_not_active_broker_interval_s"),
            ("ROCKETQ_NAMESRV_IDLE_TIMEOUT_S", "server_channel_max_idle_s"),
        ):
            if env.get(var):
                setattr(self, attr, _positive(float(env[var]), var))

    def apply_properties(self, props: dict[str, str]) -> None:
        """namesrv.conf keys: listenPort, bindAddress, rocketmqHome, kvConfigPath,
        scanNotActiveBrokerInterval (ms), brokerChannelExpiredTime (ms), serverChannelMaxIdleTimeSeconds."""
        if "listenPort" in props:
            self.listen_port = int(props["listenPort"])
        if "bindAddress" in props:
            self.bind_address = props["bindAddress"]
        if "rocketmqHome" in props:
            self.home = props["rocketmqHome"]
        if "kvConfigPath" in props:
            self.kv_config_path = props["kvConfigPath"]
        if "scanNotActiveBrokerInterval" in props:
            self.scan_not_active_broker_interval_s = _positive(
                int(props["scanNotActiveBrokerInterval"]) / 1000, "x"
            )
        if "brokerChannelExpiredTime" in props:
            self.broker_channel_expired_s = _positive(int(props["brokerChannelExpiredTime"]) / 1000, "x")
        if "serverChannelMaxIdleTimeSeconds" in props:
            self.server_channel_max_idle_s = float(props["serverChannelMaxIdleTimeSeconds"])
        if "orderMessageEnable" in props:
            self.order_message_enable = props["orderMessageEnable"].strip().lower() == "true"
        for key, attr in (
            ("kvConfigMaxEntries", "kv_config_max_entries"),
            ("kvConfigMaxBytes", "kv_config_max_bytes"),
        ):
            if key in props:
                setattr(self, attr, int(props[key]))
                if getattr(self, attr) <= 0:
                    raise ValueError(f"{key} must be > 0")
        if "authenticationEnabled" in props:
            self.authentication_enabled = props["authenticationEnabled"].strip().lower() == "true"
        for key, attr in _AUTH_TEXT_KEYS.items():
            if key in props:
                setattr(self, attr, props[key].strip())
        if "authReplayWindowSeconds" in props:
            self.auth_replay_window_s = int(props["authReplayWindowSeconds"])
            if self.auth_replay_window_s < 0:
                raise ValueError("authReplayWindowSeconds must be >= 0")
        for key in LIMIT_KEYS:
            if key in props:
                self.limit_props[key] = props[key].strip()
        if self.limit_props:
            self.server_limits()  # refuse a bad value at startup (LimitsError is a ValueError)
        for key in METRICS_KEYS:
            if key in props:
                self.metrics_props[key] = props[key].strip()
        self.metrics_settings()  # MetricsConfigError (a ValueError) names the key

    def to_properties(self) -> str:
        items = {
            "listenPort": str(self.listen_port),
            "bindAddress": self.bind_address,
            "rocketmqHome": self.home,
            "kvConfigPath": self.kv_path,
            "orderMessageEnable": "true" if self.order_message_enable else "false",
            "brokerChannelExpiredTime": str(int(self.broker_channel_expired_s * 1000)),
            "scanNotActiveBrokerInterval": str(int(self.scan_not_active_broker_interval_s * 1000)),
            "serverChannelMaxIdleTimeSeconds": f"{self.server_channel_max_idle_s:g}",
        }
        items["kvConfigMaxEntries"] = str(self.kv_config_max_entries)
        items["kvConfigMaxBytes"] = str(self.kv_config_max_bytes)
        items["authenticationEnabled"] = "true" if self.authentication_enabled else "false"
        for key, attr in _AUTH_TEXT_KEYS.items():
            value = getattr(self, attr)
            # the credentials are secrets: shown as set or not, never their value (CVE-2024-23321)
            items[key] = "******" if value and key in _SECRET_KEYS else value
        items["authReplayWindowSeconds"] = str(self.auth_replay_window_s)
        limits = self.server_limits()
        items.update({key: str(getattr(limits, attr)) for key, (attr, _, _) in LIMIT_KEYS.items()})
        items.update(
            {key: str(self.metrics_props.get(key, default)) for key, (_, default) in METRICS_KEYS.items()}
        )
        return "".join(f"{k}={v}\n" for k, v in items.items())


_AUTH_TEXT_KEYS = {
    "innerClientAuthenticationCredentials": "inner_client_authentication_credentials",
    "initAuthenticationUser": "init_authentication_user",
    "authenticationWhitelist": "authentication_whitelist",
}
_SECRET_KEYS = frozenset({"innerClientAuthenticationCredentials", "initAuthenticationUser"})

# Keys UPDATE_NAMESRV_CONFIG may change at runtime (not paths, not the listen address).
UPDATABLE_KEYS = frozenset({"orderMessageEnable", "brokerChannelExpiredTime"})


def _positive(value: float, name: str) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be positive")
    return value


def read_properties(path: str) -> dict[str, str]:
    """A minimal java.util.Properties reader: key=value or key: value, # and ! comments."""
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, c in enumerate(line):
            if c in "=:":
                props[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            props[line] = ""
    return props
