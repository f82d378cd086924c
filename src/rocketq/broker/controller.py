"""BrokerController: wires the store, managers, processors and background services of one broker."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import time
from typing import Any

from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import Channel, RemotingClient, RemotingServer
from rocketq.remoting.acl_signature import NAMESRV_STATE_CHANGING, Credentials, SigningHook
from rocketq.remoting.limits import ServerLimits

from .client_manager import ClientManager
from .config import BrokerConfig, ConfigError
from .delay import DelayLevels
from .flush_waiter import FlushWaiter
from .long_polling import PullRequestHoldService
from .namesrv_api import NamesrvApi
from .offset_manager import ConsumerOffsetManager
from .stats import BrokerStats
from .subscription_manager import SubscriptionGroupManager
from .topic_manager import TopicConfigManager

log = logging.getLogger(__name__)

# keys UPDATE_BROKER_CONFIG may change without a restart
RUNTIME_KEYS = frozenset(
    (
        "brokerPermission",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "maxMessageSize",
        "longPollingEnable",
        "shortPollingTimeMills",
        "enablePropertyFilter",
        "notifyConsumerIdsChangedEnable",
        "rejectTransactionMessage",
        "channelExpiredTimeout",
        "region",
        "syncFlushTimeout",  # read per send, as RocketMQ's handleDiskFlush does
        "slaveReadEnable",
        "whichBrokerWhenConsumeSlowly",
        "accessMessageInMemoryMaxRatio",
        "slaveTimeout",
    )
)


def store_config_of(cfg: BrokerConfig):
    from rocketq.store import StoreConfig

    return StoreConfig(
        store_path_root_dir=cfg["storePathRootDir"],
        store_path_commitlog=cfg["storePathCommitLog"],
        mapped_file_size_commitlog=cfg.commitlog_file_size,
        mapped_file_size_consume_queue=cfg.consume_queue_file_size,
        flush_disk_type=cfg["flushDiskType"],
        flush_interval_commitlog=cfg["flushIntervalCommitLog"],
        flush_commitlog_least_pages=cfg["flushCommitLogLeastPages"],
        flush_commitlog_thorough_interval=cfg["flushCommitLogThoroughInterval"],
        flush_interval_consume_queue=cfg["flushIntervalConsumeQueue"],
        flush_consume_queue_least_pages=cfg["flushConsumeQueueLeastPages"],
        flush_consume_queue_thorough_interval=cfg["flushConsumeQueueThoroughInterval"],
        sync_flush_timeout=cfg["syncFlushTimeout"],
        max_message_size=cfg["maxMessageSize"],
        file_reserved_time=cfg["fileReservedTime"],
        delete_when=cfg["deleteWhen"],
        disk_max_used_space_ratio=cfg["diskMaxUsedSpaceRatio"],
        disk_space_warning_level_ratio=cfg["diskSpaceWarningLevelRatio"],
        disk_space_clean_forcibly_ratio=cfg["diskSpaceCleanForciblyRatio"],
        clean_file_forcibly_enable=cfg["cleanFileForciblyEnable"],
        clean_resource_interval=cfg["cleanResourceInterval"],
        max_hash_slot_num=cfg["maxHashSlotNum"],
        max_index_num=cfg["maxIndexNum"],
        message_index_enable=cfg["messageIndexEnable"],
        check_crc_on_recover=cfg["checkCRCOnRecover"],
        check_crc_on_read=cfg["checkCRCOnRead"],
        warm_ahead_enable=cfg["commitLogWarmAheadEnable"],
        warm_ahead_async_enable=cfg["commitLogWarmAheadAsyncEnable"],
        warm_ahead_bytes=cfg["commitLogWarmAheadBytes"],
        warm_ahead_max_rate=cfg["commitLogWarmAheadMaxRate"] * 1_000_000,
        async_writeback_bytes=cfg["commitLogAsyncWritebackBytes"],
        commitlog_page_cache_window=cfg["commitLogPageCacheWindow"],
        sync_flush_native_aio=cfg["syncFlushNativeAio"],
        broker_role=cfg["brokerRole"],
        message_delay_level=cfg["messageDelayLevel"],
        max_transfer_bytes_on_message_in_memory=cfg["maxTransferBytesOnMessageInMemory"],
        max_transfer_count_on_message_in_memory=cfg["maxTransferCountOnMessageInMemory"],
    )


def acl_file(cfg: BrokerConfig) -> str:
    """$ROCKETMQ_ACL_FILE, else <ROCKETMQ_HOME or the store's parent dir>/conf/plain_acl.yml."""
    explicit = os.environ.get("ROCKETMQ_ACL_FILE")
    if explicit:
        return explicit
    home = os.environ.get("ROCKETMQ_HOME") or os.path.dirname(os.path.abspath(cfg["storePathRootDir"]))
    return os.path.join(home, "conf", "plain_acl.yml")


def load_acl_hook(cfg: BrokerConfig):
    from .acl import AclHook, PlainAcl

    path = acl_file(cfg)
    try:
        return AclHook(PlainAcl(path), replay_window_s=cfg["authReplayWindowSeconds"])
    except (ValueError, OSError) as exc:
        raise ConfigError(f"aclEnable=true but the ACL file is unusable: {exc}") from None
    except Exception as exc:  # YAML syntax errors
        raise ConfigError(f"aclEnable=true but {path} does not parse: {exc}") from None


def inner_signing_hook(cfg: BrokerConfig) -> SigningHook | None:
    """Signs the broker's NameServer requests with innerClientAuthenticationCredentials (if set)."""
    creds = Credentials.parse(cfg["innerClientAuthenticationCredentials"])
    if creds is None:
        return None
    return SigningHook(creds.access_key, creds.secret_key, stamp_codes=NAMESRV_STATE_CHANGING)


class BrokerController:
    def __init__(self, cfg: BrokerConfig, bind_host: str | None = None, ha_listen: bool = True) -> None:
        self.cfg = cfg
        self.ha_listen = ha_listen  # masters open haListenPort (standalone: only when configured)
        self.replication: Any = None  # broker/replication.py, once started
        self.slave_sync: Any = None
        self.ha_any_port = False
        self.bind_host = bind_host or cfg["brokerIP1"]
        self.broker_perm = cfg["brokerPermission"]
        self.delay_levels = DelayLevels(cfg.delay_levels_ms)
        self.topics = TopicConfigManager(cfg)
        self.subscriptions = SubscriptionGroupManager(cfg)
        self.offsets = ConsumerOffsetManager(cfg)
        self.clients = ClientManager(cfg["channelExpiredTimeout"] / 1000.0)
        self.server = RemotingServer(
            self.bind_host,
            cfg["listenPort"],
            idle_timeout_s=cfg["clientChannelMaxIdleTimeSeconds"],
            limits=ServerLimits.from_config(cfg.values.get),
            name="broker",
        )
        self.client = RemotingClient(rpc_hook=inner_signing_hook(cfg))
        self.namesrv = NamesrvApi(cfg, self.client)
        self.store: Any = None
        self.flush_waiter: FlushWaiter | None = None
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.hold: PullRequestHoldService = None  # type: ignore[assignment]
        self.schedule: Any = None
        self.transactions: Any = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._register_task: asyncio.Task[None] | None = None
        self._register_again = False
        self._stopped = False
        self.boot_timestamp = int(time.time() * 1000)
        self.stats = BrokerStats()
        self.processors: list[Any] = []
        self.store_locks: list[Any] = []  # dirlock.py: held from start() until the end of shutdown()
        self.metrics: Any = None  # rocketq.metrics.broker.BrokerMetrics with metricsExporterType=PROM
        if cfg["aclEnable"]:
            self.server.rpc_hook = load_acl_hook(cfg)
        from .read_acl import ReadGuard

        # reads authorized by the stored message's topics (VIEW/QUERY/send-back/pull of %RETRY%, ...)
        self.reads = ReadGuard(self.server.rpc_hook if cfg["aclEnable"] else None)

    @property
    def broker_addr(self) -> str:
        return f"{self.cfg['brokerIP1']}:{self.server.port or self.cfg['listenPort']}"

    # -- start -------------------------------------------------------------------------------
    async def start(self) -> None:
        from rocketq.store import MessageStore

        from .processors import admin, client, forward, ha_status, offsets, pull, query, reply, send, sendback
        from .schedule import ScheduleMessageService
        from .transactions import TransactionService

        self.loop = asyncio.get_running_loop()
        self.lock_store()  # before anything reads or writes the store directory
        os.makedirs(self.cfg.config_dir, exist_ok=True)
        self.topics.load()
        self.subscriptions.load()
        self.offsets.load()

        # listenPort 0 (any free port) without a haListenPort: the HA port is any free one too, not port + 1
        self.ha_any_port = self.cfg["listenPort"] == 0 and self.cfg["haListenPort"] <= 0
        if self.cfg["listenPort"] == 0:  # any free port: pick it now, the store host (msg ids) needs it
            with socket.socket() as probe:
                probe.bind((self.bind_host, 0))
                self.cfg.values["listenPort"] = probe.getsockname()[1]
            self.server.port = self.cfg["listenPort"]
        store_host = (self.cfg["brokerIP1"], self.cfg["listenPort"])
        self.store = MessageStore(store_config_of(self.cfg), store_host)
        waiter = FlushWaiter(self.loop, self.cfg["syncFlushTimeout"] / 1000.0)
        if self.store.set_loop_flush_listener(self.loop, waiter.advance):  # SYNC_FLUSH: acks wait on the loop
            self.flush_waiter = waiter
        if self.store.stages_runs:
            # one pwrite (and under SYNC_FLUSH one group-commit wake-up) per run of pipelined sends
            self.server.set_burst_hooks(self.store.hold_flush_wakeups, self.store.release_flush_wakeups)
        await self.loop.run_in_executor(None, self.store.start)
        from .forced_clean import watch as watch_forced_clean
        from .replication import Replication

        watch_forced_clean(self)  # a forced clean at 85 % disk is logged and counted per consumer group
        self.replication = Replication(self)

        pull_proc = pull.PullProcessor(self)
        self.hold = PullRequestHoldService(pull_proc.repull, self.store.get_max_offset_in_queue)
        self.hold.start()
        self.store.set_arrival_listener(self.hold.arrival_listener)

        self.processors = [
            send.SendProcessor(self),
            pull_proc,
            offsets.OffsetProcessor(self),
            query.QueryProcessor(self),
            client.ClientProcessor(self),
            sendback.SendBackProcessor(self),
            admin.AdminProcessor(self),
            forward.ForwardProcessor(self),
            reply.ReplyProcessor(self),
            ha_status.HAStatusProcessor(self),
        ]
        for proc in self.processors:
            proc.register(self.server)
        self.server.on_channel_close(self.clients.channel_closed)
        self.clients.on_consumer_ids_changed = self.notify_consumer_ids_changed
        self.topics.on_change = self.register_soon

        self.transactions = TransactionService(self)
        self.transactions.register(self.server)
        self.schedule = ScheduleMessageService(self)
        self.schedule.load()

        await self.start_metrics()  # before the first request: messages stored from now on are counted
        await self.server.start()
        await self.replication.start(self.ha_listen)
        self.replication.install_arrival_listener(self.hold.arrival_listener)
        if not self.replication.is_slave:  # a slave writes nothing of its own (RocketMQ starts neither)
            self.schedule.start()
            self.transactions.start()
        self.stats.start()
        from .processors.transaction import register as register_batch_transactions

        self.batch_transactions = register_batch_transactions(self)  # Spark exactly-once sink commits
        if self.replication.is_slave:  # copies the master's metadata as soon as it learns its master
            from .slave_sync import SlaveSynchronize

            self.slave_sync = SlaveSynchronize(self)
            sync = self.slave_sync.sync_all
            self.replication.ha.on_master_changed = lambda _addr: self.loop.create_task(sync())
        await self.register_all()
        self._tasks += [
            self.loop.create_task(
                self._every(self.cfg["registerNameServerPeriod"] / 1000.0, self.register_all)
            ),
            self.loop.create_task(self._every(10.0, self._scan_clients)),
            self.loop.create_task(
                self._every(self.cfg["flushConsumerOffsetInterval"] / 1000.0, self._persist_offsets)
            ),
        ]
        if self.slave_sync is not None:
            from .slave_sync import PERIOD_S

            self._tasks.append(self.loop.create_task(self._every(PERIOD_S, self.slave_sync.sync_all)))

    async def start_metrics(self) -> None:
        """metricsExporterType=PROM: /metrics on metricsPromExporterHost:metricsPromExporterPort
        (rocketq/metrics/broker.py); with aclEnable it takes the ACL file's admin accounts."""
        from rocketq.metrics.settings import MetricsSettings

        settings = MetricsSettings.from_config(self.cfg.values.get)
        if not settings.enabled:
            return
        from rocketq.metrics.auth import CredentialsError, make_auth
        from rocketq.metrics.broker import BrokerMetrics

        hook = self.server.rpc_hook if self.cfg["aclEnable"] else None

        def accounts() -> dict[str, tuple[str, bool]]:
            acl = hook.acl  # type: ignore[union-attr]
            acl.maybe_reload()
            return {a.access_key: (a.secret_key, a.admin) for a in acl.accounts.values()}

        try:
            auth = make_auth(settings.token_file, accounts if hook is not None else None)
        except CredentialsError as exc:
            raise ConfigError(str(exc)) from None
        self.metrics = BrokerMetrics(self, settings, auth)
        await self.metrics.start()

    def lock_store(self) -> None:
        """Refuse to start (StoreLocked: "Lock failed, MQ already started") when another process holds
        this store."""
        from rocketq.dirlock import lock_store

        if not self.store_locks:
            self.store_locks = lock_store(self.cfg["storePathRootDir"], self.cfg["storePathCommitLog"])

    async def _every(self, period_s: float, fn) -> None:
        period_s = max(period_s, 0.05)
        while True:
            await asyncio.sleep(period_s)
            try:
                res = fn()
                if asyncio.iscoroutine(res):
                    await res
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def _scan_clients(self) -> None:
        self.clients.scan_expired()

    async def _persist_offsets(self) -> None:
        self.offsets.persist()

    # -- name server -------------------------------------------------------------------------
    async def register_all(self) -> None:
        if self._stopped:
            return
        wrapper = self.topics.wrapper()
        if not self.broker_perm & 2 or not self.broker_perm & 4:
            # a read-only / write-only broker advertises its topics so (copies: the table stays intact)
            table = wrapper.topic_config_table
            for name, tc in table.items():
                table[name] = dataclasses.replace(tc, perm=tc.perm & self.broker_perm)
        await self.namesrv.register_all(wrapper, self.broker_addr)
        if self.replication is not None:
            self.replication.on_registered(self.namesrv.last_results)

    async def register_now(self) -> None:
        """Register and wait for the name servers' answers (so a route exists when a request that
        created a topic is answered, as in RocketMQ)."""
        try:
            await asyncio.wait_for(self.register_all(), self.cfg["registerBrokerTimeoutMills"] / 1000.0 + 1.0)
        except Exception as exc:
            log.warning("register broker failed: %s", exc)

    def register_soon(self) -> None:
        """Coalesce bursts of topic changes into one registration round."""
        if self.loop is None or self._stopped:
            return
        if self._register_task is not None and not self._register_task.done():
            self._register_again = True
            return
        self._register_task = self.loop.create_task(self._register_loop())

    async def _register_loop(self) -> None:
        while True:
            self._register_again = False
            try:
                await self.register_all()
            except Exception:
                log.exception("register broker failed")
            if not self._register_again:
                return

    # -- runtime config ----------------------------------------------------------------------
    def apply_config(self, changes: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: validate every key first (ConfigError), then apply them all."""
        trial = BrokerConfig(values=dict(self.cfg.values), source="updateBrokerConfig")
        for key, value in changes.items():
            if key not in RUNTIME_KEYS:
                raise ConfigError(f"{key} can not be changed at runtime (edit broker.conf and restart)")
            trial.set(key, value)
        trial.validate()
        perm_before = self.broker_perm
        self.cfg.values.update({k: trial.values[k] for k in changes})
        self.broker_perm = self.cfg["brokerPermission"]
        self.clients.expire_s = self.cfg["channelExpiredTimeout"] / 1000.0
        if "syncFlushTimeout" in changes and self.flush_waiter is not None:
            self.flush_waiter.set_timeout(self.cfg["syncFlushTimeout"] / 1000.0)
        if "slaveTimeout" in changes and self.replication is not None:
            self.replication.ha.set_slave_timeout(self.cfg["slaveTimeout"] / 1000.0)
        for proc in self.processors:
            reload = getattr(proc, "reload", None)
            if reload is not None:
                reload()
        if "autoCreateTopicEnable" in changes:  # TBW102 exists exactly when auto-create is on
            self.topics.ensure_system_topics()
        if self.broker_perm != perm_before:
            self.register_soon()

    # -- consumers ---------------------------------------------------------------------------
    def notify_consumer_ids_changed(self, group: str) -> None:
        if not self.cfg["notifyConsumerIdsChangedEnable"]:
            return
        cgi = self.clients.get_consumer_group(group)
        if cgi is None:
            return
        for info in list(cgi.channels.values()):
            ch: Channel = info.channel
            if ch.closed:
                continue
            req = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
            try:
                ch.invoke_oneway(req)
            except Exception as exc:
                log.info("notify consumer ids changed to %s failed: %s", ch.remote_addr, exc)

    # -- shutdown ----------------------------------------------------------------------------
    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for t in self._tasks:
            t.cancel()
        if self._register_task is not None:
            self._register_task.cancel()
        if self.schedule is not None:
            self.schedule.stop()
        if self.transactions is not None:
            self.transactions.stop()
        self.stats.stop()
        if self.metrics is not None:
            await self.metrics.close()
        if self.hold is not None:
            self.hold.stop()
        if self.replication is not None:
            try:
                await self.replication.close()
            except Exception:
                log.exception("closing replication failed")
        try:
            await self.server.close(grace_s=0.5)
        except Exception:
            log.exception("closing the remoting server failed")
        try:
            await asyncio.wait_for(self.namesrv.unregister_all(self.broker_addr), 5.0)
        except Exception:
            log.warning("unregister from name servers did not finish")
        await self.client.close()
        if self.store is not None:
            await self.loop.run_in_executor(None, self.store.shutdown)
        if self.flush_waiter is not None:
            self.flush_waiter.close()
        if not self.store_locks:
            return  # never owned the store (not started, or another process holds it): write nothing there
        self.topics.persist_sync()
        self.subscriptions.persist_sync()
        self.offsets.persist_sync()
        if self.schedule is not None:
            self.schedule.persist_sync()
        batch = getattr(self, "batch_transactions", None)
        if batch is not None and hasattr(batch, "persist_sync"):
            batch.persist_sync()
        for lock in reversed(self.store_locks):  # last: everything above has been written
            lock.release()
        self.store_locks = []
