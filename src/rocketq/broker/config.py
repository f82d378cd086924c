"""BrokerConfig: broker.conf with RocketMQ's property names.

Every key is declared once in ``_KEYS`` (name, type, default); an unknown key or a value that does not
parse is a :class:`ConfigError` naming the key and its line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from rocketq.metrics.settings import METRICS_KEYS, MetricsConfigError, MetricsSettings
from rocketq.remoting.acl_signature import Credentials
from rocketq.remoting.limits import LIMIT_KEYS, LimitsError, ServerLimits

from .javaprops import PropertiesError, parse_properties


class ConfigError(ValueError):
    """A broker.conf problem; the message names the key and line."""


_DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# RocketMQ key -> (type, default). Types: str, int, bool, float.
_KEYS: dict[str, tuple[type, Any]] = {
    # identity / network
    "brokerClusterName": (str, "DefaultCluster"),
    "brokerName": (str, "broker-a"),
    "brokerId": (int, 0),
    "listenPort": (int, 10911),
    "brokerIP1": (str, "127.0.0.1"),
    "brokerIP2": (str, ""),
    "namesrvAddr": (str, ""),
    "haListenPort": (int, 0),  # <= 0: listenPort + 1 (RocketMQ 5's BrokerStartup), i.e. 10912 by default
    "region": (str, "DefaultRegion"),
    "brokerPermission": (int, 6),
    "registerBrokerTimeoutMills": (int, 6000),
    "registerNameServerPeriod": (int, 30000),
    "compressedRegister": (bool, False),
    "forceRegister": (bool, True),
    # store
    "storePathRootDir": (str, ""),
    "storePathCommitLog": (str, ""),
    "flushDiskType": (str, "ASYNC_FLUSH"),
    "brokerRole": (str, "ASYNC_MASTER"),
    "deleteWhen": (str, "04"),
    "fileReservedTime": (int, 72),
    "mapedFileSizeCommitLog": (int, 1 << 30),
    "mappedFileSizeCommitLog": (int, 0),  # newer spelling; overrides when set
    "mapedFileSizeConsumeQueue": (int, 300_000 * 20),
    "mappedFileSizeConsumeQueue": (int, 0),
    "flushIntervalCommitLog": (int, 500),
    "flushCommitLogLeastPages": (int, 4),
    "flushCommitLogThoroughInterval": (int, 10_000),
    "flushIntervalConsumeQueue": (int, 1000),
    "flushConsumeQueueLeastPages": (int, 2),
    "flushConsumeQueueThoroughInterval": (int, 60_000),
    "syncFlushTimeout": (int, 5000),
    "diskMaxUsedSpaceRatio": (int, 75),
    "diskSpaceWarningLevelRatio": (int, 90),
    "diskSpaceCleanForciblyRatio": (int, 85),
    "cleanFileForciblyEnable": (bool, True),
    "cleanResourceInterval": (int, 10_000),
    "maxMessageSize": (int, 4 * 1024 * 1024),
    "maxHashSlotNum": (int, 5_000_000),
    "maxIndexNum": (int, 20_000_000),
    "messageIndexEnable": (bool, True),
    "checkCRCOnRecover": (bool, True),
    # rocketq: never serve a record whose body fails its CRC (store/integrity.py)
    "checkCRCOnRead": (bool, True),
    "commitLogWarmAheadEnable": (bool, True),  # rocketq: SYNC_FLUSH zeros ahead of the writer (store/warm.py)
    # rocketq: ASYNC_FLUSH page-cache zeros ahead of the writer too (store/warm.py; off: measured no gain)
    "commitLogWarmAheadAsyncEnable": (bool, False),
    "commitLogWarmAheadBytes": (int, 8 << 20),
    # rocketq: MB/s of appends above which the zeros pause (store/warm.py; 0: never)
    "commitLogWarmAheadMaxRate": (int, 160),
    # rocketq: ASYNC_FLUSH writes with pwrite and starts writeback every this many bytes (store/writeback.py)
    "commitLogAsyncWritebackBytes": (int, 0),
    # rocketq: release the CommitLog's page cache this far behind the flushed end (store/cache_release.py)
    "commitLogPageCacheWindow": (int, 256 << 20),
    # rocketq: SYNC_FLUSH submits group-commit fdatasyncs with native AIO from the loop (store/loop_flush.py)
    "syncFlushNativeAio": (bool, True),
    "flushDelayOffsetInterval": (int, 10_000),
    "flushConsumerOffsetInterval": (int, 5000),
    # topics / groups
    "autoCreateTopicEnable": (bool, False),
    "autoCreateSubscriptionGroup": (bool, True),
    # rocketq: no more auto-created groups once this many exist (admin-created ones are not limited)
    "autoCreateSubscriptionGroupLimit": (int, 10_000),
    "defaultTopicQueueNums": (int, 8),
    "clusterTopicEnable": (bool, True),
    "brokerTopicEnable": (bool, True),
    "traceTopicEnable": (bool, False),
    "msgTraceTopicName": (str, "RMQ_SYS_TRACE_TOPIC"),
    "messageDelayLevel": (str, _DEFAULT_DELAY_LEVELS),
    "maxReconsumeTimes": (int, 16),
    # consume
    "longPollingEnable": (bool, True),
    "shortPollingTimeMills": (int, 1000),
    "notifyConsumerIdsChangedEnable": (bool, True),
    "channelExpiredTimeout": (int, 120_000),
    "clientChannelMaxIdleTimeSeconds": (int, 120),
    "maxTransferCountOnMessageInMemory": (int, 32),
    "maxTransferBytesOnMessageInMemory": (int, 256 * 1024),
    "transferMsgByHeap": (bool, True),
    "enablePropertyFilter": (bool, False),
    "filterSupportRetry": (bool, False),
    "rejectTransactionMessage": (bool, False),
    "transactionTimeOut": (int, 6000),
    "transactionCheckMax": (int, 15),
    "transactionCheckInterval": (int, 60_000),
    "aclEnable": (bool, False),
    # RocketMQ 5: {"accessKey": .., "secretKey": ..} the broker signs its NameServer requests with (and a
    # slave with aclEnable its metadata calls to the master and its HA handshake, ha/auth.py)
    "innerClientAuthenticationCredentials": (str, ""),
    # rocketq: with aclEnable, a signed admin request seen again within this many seconds is refused (0: off)
    "authReplayWindowSeconds": (int, 120),
    # rocketq: what a peer can make the remoting server hold before any request runs (remoting/limits.py)
    **{key: (typ, default) for key, (_, typ, default) in LIMIT_KEYS.items()},
    # metrics exporter (rocketq/metrics/settings.py): metricsExporterType=PROM serves /metrics
    **METRICS_KEYS,
    "useTLS": (bool, False),
    "sendMessageThreadPoolNums": (int, 1),
    "pullMessageThreadPoolNums": (int, 16),
    "waitTimeMillsInSendQueue": (int, 200),
    "osPageCacheBusyTimeOutMills": (int, 1000),
    # master-slave replication (ha/): RocketMQ's MessageStoreConfig / BrokerConfig names and defaults
    "haMasterAddress": (str, ""),
    "haSendHeartbeatInterval": (int, 5000),
    "haHousekeepingInterval": (int, 20_000),
    "haTransferBatchSize": (int, 32 * 1024),
    "haMaxGapNotInSync": (int, 256 * 1024 * 1024),
    "slaveTimeout": (int, 3000),
    "inSyncReplicas": (int, 1),
    "minInSyncReplicas": (int, 1),
    "allAckInSyncStateSet": (bool, False),
    "slaveReadEnable": (bool, False),
    "whichBrokerWhenConsumeSlowly": (int, 1),
    "accessMessageInMemoryMaxRatio": (int, 40),
}

# keys whose values are secrets: masked in listings (GET_BROKER_CONFIG, the startup log, -p)
SECRET_KEYS = frozenset({"innerClientAuthenticationCredentials"})

# Values that leave a broker unusable or unstable (every send refused, every SYNC_FLUSH send timing out,
# healthy clients expired, consumers spinning): refused at load and by UPDATE_BROKER_CONFIG alike.
# key -> (lowest, highest, what a value outside does)
_RANGES: dict[str, tuple[int, int, str]] = {
    "maxMessageSize": (1024, 64 * 1024 * 1024, "a smaller limit refuses nearly every message"),
    "syncFlushTimeout": (100, 600_000, "too short a wait fails SYNC_FLUSH sends that did reach the disk"),
    "channelExpiredTimeout": (5_000, 86_400_000, "too short expires clients between their heartbeats"),
    "shortPollingTimeMills": (1, 60_000, "0 makes consumers without long polling pull in a busy loop"),
    "defaultTopicQueueNums": (1, 1024, "a topic needs 1..1024 queues"),
    "diskMaxUsedSpaceRatio": (1, 100, "a percentage"),
    "diskSpaceWarningLevelRatio": (1, 100, "a percentage"),
    "diskSpaceCleanForciblyRatio": (1, 100, "a percentage"),
    "fileReservedTime": (0, 100 * 365 * 24, "hours"),
    "cleanResourceInterval": (100, 3_600_000, "ms between retention and disk checks"),
    "autoCreateSubscriptionGroupLimit": (0, 10_000_000, "a count of groups"),
}
# RocketMQ's PermName: 4 read, 2 write, 1 inherit (valid 0..7); a broker that can do neither answers nothing
_PERM_READ_WRITE = 6
_REGION_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")

# RocketMQ renamed these keys (4.x "maped" -> "mapped"): both spellings are read, the newer one wins when
# non-zero; listings show each once, under the newer name, with the size in effect
_RENAMED = {
    "mapedFileSizeCommitLog": ("mappedFileSizeCommitLog", "commitlog_file_size"),
    "mapedFileSizeConsumeQueue": ("mappedFileSizeConsumeQueue", "consume_queue_file_size"),
}
_NEW_NAMES = {new for new, _ in _RENAMED.values()}

_VALID_FLUSH = ("ASYNC_FLUSH", "SYNC_FLUSH")
_VALID_ROLE = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
_DELAY_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DELAY_RE = re.compile(r"^(\d+)([smhd])$")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def parse_delay_levels(text: str) -> list[int]:
    """'1s 5s 1m' -> [1000, 5000, 60000] (ms per level, level 1 first)."""
    out = []
    for item in text.split():
        m = _DELAY_RE.match(item)
        if not m:
            raise ValueError(f"bad delay level {item!r} (expected e.g. 1s, 5m, 2h)")
        out.append(int(m.group(1)) * _DELAY_UNITS[m.group(2)])
    if not out:
        raise ValueError("messageDelayLevel is empty")
    return out


def _convert(key: str, typ: type, raw: str) -> Any:
    if typ is bool:
        low = raw.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        raise ValueError(f"expected true or false, got {raw!r}")
    if typ is int:
        return int(raw.strip())
    if typ is float:
        return float(raw.strip())
    return raw


@dataclass
class BrokerConfig:
    values: dict[str, Any] = field(default_factory=lambda: {k: d for k, (_, d) in _KEYS.items()})
    source: str = ""
    explicit: set[str] = field(default_factory=set)  # keys set by the file or overrides

    def __getattr__(self, name: str) -> Any:
        # Pythonic access: cfg.broker_name == cfg["brokerName"]
        values = self.__dict__.get("values")
        if values is not None:
            key = _ATTR_TO_KEY.get(name)
            if key is not None:
                return values[key]
        raise AttributeError(name)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def set(self, key: str, raw: str | Any, line: int = 0) -> None:
        spec = _KEYS.get(key)
        where = f"{self.source or 'config'}" + (f" line {line}" if line else "")
        if spec is None:
            raise ConfigError(f"{where}: unknown broker config key {key!r}")
        typ = spec[0]
        try:
            value = _convert(key, typ, raw) if isinstance(raw, str) else typ(raw)
        except ValueError as exc:
            raise ConfigError(f"{where}: bad value for {key!r}: {exc}") from None
        self.values[key] = value
        self.explicit.add(key)

    # -- derived -----------------------------------------------------------------------------
    @property
    def broker_addr(self) -> str:
        return f"{self['brokerIP1']}:{self['listenPort']}"

    @property
    def delay_levels_ms(self) -> list[int]:
        return parse_delay_levels(self["messageDelayLevel"])

    @property
    def commitlog_file_size(self) -> int:
        return self["mappedFileSizeCommitLog"] or self["mapedFileSizeCommitLog"]

    @property
    def consume_queue_file_size(self) -> int:
        return self["mappedFileSizeConsumeQueue"] or self["mapedFileSizeConsumeQueue"]

    @property
    def ha_listen_port(self) -> int:
        """The HA port: haListenPort, or listenPort + 1 when it is <= 0 (0 too when listenPort is 0: any)."""
        port = self["haListenPort"]
        if port > 0:
            return port
        return self["listenPort"] + 1 if self["listenPort"] > 0 else 0

    @property
    def is_slave(self) -> bool:
        return self["brokerRole"] == "SLAVE"

    @property
    def config_dir(self) -> str:
        return os.path.join(self["storePathRootDir"], "config")

    def listing(self) -> list[str]:
        """``key=value`` lines as getBrokerConfig and ``rocketq broker -p`` show them."""
        lines = []
        for key, value in self.values.items():
            if key in _NEW_NAMES:
                continue
            if key in _RENAMED:
                key, attr = _RENAMED[key]
                value = getattr(self, attr)
            if key in SECRET_KEYS and value:  # set or not, never the value (CVE-2024-23321)
                value = "******"
            lines.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
        return lines

    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self["namesrvAddr"].split(";") if a.strip()]

    def validate(self) -> None:
        where = self.source or "config"
        if self["flushDiskType"] not in _VALID_FLUSH:
            raise ConfigError(f"{where}: flushDiskType must be one of {_VALID_FLUSH}")
        if self["brokerRole"] not in _VALID_ROLE:
            raise ConfigError(f"{where}: brokerRole must be one of {_VALID_ROLE}")
        try:
            self.delay_levels_ms  # noqa: B018
        except ValueError as exc:
            raise ConfigError(f"{where}: bad value for 'messageDelayLevel': {exc}") from None
        if not 0 <= self["listenPort"] < 65536:  # 0: any free port (tests, embedding)
            raise ConfigError(f"{where}: listenPort out of range")
        if self["brokerId"] < 0:
            raise ConfigError(f"{where}: brokerId must be >= 0")
        if self["brokerRole"] == "SLAVE" and self["brokerId"] <= 0:
            raise ConfigError(f"{where}: Slave's brokerId must be > 0 (brokerRole=SLAVE)")
        if not 0 <= self["haListenPort"] < 65536:
            raise ConfigError(f"{where}: haListenPort out of range")
        for key in ("haSendHeartbeatInterval", "haHousekeepingInterval", "haTransferBatchSize",
                    "slaveTimeout"):  # fmt: skip
            if self[key] <= 0:
                raise ConfigError(f"{where}: {key} must be > 0")
        if self["haTransferBatchSize"] > 4 * 1024 * 1024:
            raise ConfigError(f"{where}: haTransferBatchSize must be <= 4194304 (a slave's frame limit)")
        if self["inSyncReplicas"] < 1 or self["minInSyncReplicas"] < 1:
            raise ConfigError(f"{where}: inSyncReplicas and minInSyncReplicas must be >= 1")
        if self["inSyncReplicas"] < self["minInSyncReplicas"]:
            raise ConfigError(f"{where}: inSyncReplicas must be >= minInSyncReplicas")
        if not 0 < self["accessMessageInMemoryMaxRatio"] <= 100:
            raise ConfigError(f"{where}: accessMessageInMemoryMaxRatio must be in 1..100")
        for key, (lo, hi, why) in _RANGES.items():
            if not lo <= self[key] <= hi:
                raise ConfigError(f"{where}: {key}={self[key]} is out of range {lo}..{hi} ({why})")
        perm = self["brokerPermission"]
        if not (0 <= perm <= 7 and perm & _PERM_READ_WRITE):
            raise ConfigError(
                f"{where}: brokerPermission={perm} would leave the broker neither readable nor writable; "
                "use 6 (read and write), 4 (read only) or 2 (write only)"
            )
        if not _REGION_RE.fullmatch(self["region"]):
            raise ConfigError(f"{where}: region must be 1..128 characters of [A-Za-z0-9_.:-]")
        if self["authReplayWindowSeconds"] < 0:
            raise ConfigError(f"{where}: authReplayWindowSeconds must be >= 0")
        try:
            Credentials.parse(self["innerClientAuthenticationCredentials"])
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        try:
            ServerLimits.from_config(self.values.get)
        except LimitsError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        try:
            MetricsSettings.from_config(self.values.get)
        except MetricsConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        for key in ("brokerName", "brokerClusterName"):
            if not re.fullmatch(r"[%|a-zA-Z0-9_-]{1,127}", self[key]):
                raise ConfigError(f"{where}: {key} {self[key]!r} has characters outside [%|a-zA-Z0-9_-]")


_ATTR_TO_KEY = {_snake(k): k for k in _KEYS}


def known_keys() -> list[str]:
    return list(_KEYS)


def load_config(path: str | None, overrides: dict[str, Any] | None = None) -> BrokerConfig:
    """Read broker.conf (if given), apply overrides (e.g. from the command line), validate."""
    cfg = BrokerConfig(source=path or "")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"cannot read broker config {path}: {exc}") from None
        try:
            entries = parse_properties(text)
        except PropertiesError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        for key, value, line in entries:
            cfg.set(key, value, line)
    for key, value in (overrides or {}).items():
        cfg.set(
            key,
            value
            if isinstance(value, str)
            else str(value).lower()
            if isinstance(value, bool)
            else str(value),
        )
    if not cfg["storePathRootDir"]:
        cfg.values["storePathRootDir"] = os.path.join(os.path.expanduser("~"), "store")
    if not cfg["storePathCommitLog"]:
        cfg.values["storePathCommitLog"] = os.path.join(cfg["storePathRootDir"], "commitlog")
    if cfg["brokerRole"] != "SLAVE":
        cfg.values["brokerId"] = 0  # a master's id is 0 whatever the file says (RocketMQ's BrokerStartup)
    cfg.validate()
    return cfg
