"""The broker's metrics: RocketMQ 5.x's BrokerMetricsManager and DefaultStoreMetricsManager series, and
rocketq's own (``rocketq_`` prefix) for the store's integrity counters and the remoting guard.

Every series carries ``cluster`` (brokerClusterName), ``node_type="broker"``, ``node_id`` (brokerName) and
the ``metricsLabel`` pairs, as RocketMQ's do. Nothing here is counted per message on the send path:
messages and bytes in are read off the consume queues at scrape time (intake.py); messages out, DLQ and
transaction counts are kept per request by the pull, send-back and end-transaction paths (broker/stats.py);
gauges are computed when scraped. This module reads the broker through its attributes (the BrokerContext
names) and never imports the broker package.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from rocketq.protocol.codes import PERM_READ, PERM_WRITE
from rocketq.protocol.properties import RETRY_GROUP_TOPIC_PREFIX
from rocketq.protocol.record import store_timestamp_pos

from .exporter import ProcessMetrics
from .intake import SIZE_BUCKETS, IncomingTraffic
from .labels import TIMER_TOPIC, flag, is_retry_or_dlq, is_system_group, is_system_topic, message_type_of
from .rpc import RpcLatency
from .settings import MetricsSettings
from .versions import version_desc

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# ConsumeType -> RocketMQ's consume_mode label (ConsumeType.getTypeCN().toLowerCase())
CONSUME_MODES = {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}


@dataclass(slots=True)
class LagRow:
    group: str
    topic: str
    lag: int = 0
    earliest_unconsumed_ms: int = 0  # store time of the first unconsumed message (0: none)
    inflight: int = 0
    earliest_unpulled_ms: int = 0
    ready: int = 0


@dataclass(slots=True)
class BrokerSnapshot:
    """What one scrape reads from the broker, copied on the loop thread."""

    now_ms: int
    labels: dict[str, str]
    own_names: frozenset[str]
    topics: dict[str, str]  # topic -> message_type label
    topic_number: int
    group_number: int
    broker_permission: int
    queues: list[tuple[str, int, Any, int]]  # topic, queue id, consume queue, max offset (for intake)
    out: list[tuple[tuple[str, str], tuple[int, int]]]
    dlq: list[tuple[tuple[str, str], int]]
    tx_commit: list[tuple[str, int]]
    tx_rollback: list[tuple[str, int]]
    half: dict[str, int]
    producers: Counter[tuple[str, str]]
    consumers: Counter[tuple[str, str, str, str]]
    lag: list[LagRow]
    store_dir: str
    flush_behind: int
    dispatch_behind: int
    earliest_store_ms: int
    store_counters: dict[str, int]
    guard: dict[str, int]
    guard_connections: int
    rpc: list[Any] = field(default_factory=list)
    timer: dict[str, Any] | None = None


class BrokerCollector:
    def __init__(self, ctl: Any, settings: MetricsSettings, rpc: RpcLatency | None) -> None:
        self.ctl = ctl
        self.settings = settings
        self.rpc = rpc
        self.intake = IncomingTraffic()
        self._snap: BrokerSnapshot | None = None

    # -- loop thread ---------------------------------------------------------------------------
    def start(self) -> None:
        """At broker start, once the store is up: messages already stored are not counted as in."""
        self.intake.baseline((t, q, cq) for (t, q), cq in list(self.ctl.store.consume_queue_table.items()))

    def prepare(self) -> None:
        ctl = self.ctl
        cfg = ctl.cfg
        store = ctl.store
        stats = ctl.stats
        cluster, broker = cfg["brokerClusterName"], cfg["brokerName"]
        labels = {
            **self.settings.labels,
            "cluster": cluster,
            "node_type": "broker",
            "node_id": broker,
        }
        topic_table = dict(ctl.topics.table)
        topics = {t: message_type_of(t, getattr(tc, "attributes", None)) for t, tc in topic_table.items()}
        queues = [
            (t, q, cq, cq.get_max_offset_in_queue()) for (t, q), cq in store.consume_queue_table.items()
        ]
        producers: Counter[tuple[str, str]] = Counter()
        for chans in ctl.clients.producers.values():
            for info in chans.values():
                producers[(info.language.lower(), version_desc(info.version))] += 1
        consumers: Counter[tuple[str, str, str, str]] = Counter()
        for group, cgi in ctl.clients.consumers.items():
            mode = CONSUME_MODES.get(cgi.consume_type, cgi.consume_type.lower())
            for info in cgi.channels.values():
                consumers[(group, info.language.lower(), version_desc(info.version), mode)] += 1
        transactions = getattr(ctl, "transactions", None)
        half = transactions.pending_halves() if transactions is not None else {}
        store_counters = {
            "crc_read": store.integrity.skipped_on_read,
            "crc_recover": store.integrity.kept_on_recover,
            "crc_records": store.integrity.distinct,
            "put_failures": store.put_failures,
            "forced_clean_unconsumed": stats.forced_clean_unconsumed,
        }
        clean = getattr(store, "clean", None)
        if clean is not None:
            st = clean.stats
            store_counters["forced_passes"] = st.forced_passes
            store_counters["forced_segments"] = st.forced_segments_deleted
            store_counters["forced_messages"] = st.forced_messages_deleted
        guard = ctl.server.guard
        self._snap = BrokerSnapshot(
            now_ms=int(time.time() * 1000),
            labels=labels,
            own_names=frozenset((cluster, broker)),
            topics=topics,
            topic_number=len(topic_table),
            group_number=len(ctl.subscriptions.table),
            broker_permission=ctl.broker_perm,
            queues=queues,
            out=[(k, (v[0], v[1])) for k, v in stats.out.items()],
            dlq=list(stats.dlq.items()),
            tx_commit=list(stats.tx_commit.items()),
            tx_rollback=list(stats.tx_rollback.items()),
            half=half,
            producers=producers,
            consumers=consumers,
            lag=self._lag(topic_table),
            store_dir=cfg["storePathRootDir"],
            flush_behind=max(store.max_phy_offset - store.flushed_phy_offset, 0),
            dispatch_behind=store.dispatch_behind_bytes(),
            earliest_store_ms=self._earliest_store_time(),
            store_counters=store_counters,
            guard=dict(guard.events.total),
            guard_connections=guard.connections,
            rpc=self.rpc.snapshot() if self.rpc is not None else [],
            timer=timer_state(getattr(ctl, "timer", None), store),
        )

    def _lag(self, topic_table: dict[str, Any]) -> list[LagRow]:
        """RocketMQ's ConsumerLagCalculator: every online group of the subscription table, each topic it
        subscribes to (not its %RETRY% topic), over the topic's write queues."""
        ctl = self.ctl
        store = ctl.store
        offsets = ctl.offsets
        pulls = ctl.stats.pull_offsets
        perm = ctl.broker_perm
        rows = []
        for group, cgi in list(ctl.clients.consumers.items()):
            if group not in ctl.subscriptions.table:
                continue
            for topic in list(cgi.subscriptions):
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    continue
                tc = topic_table.get(topic)
                if tc is None or not tc.perm & perm & (PERM_READ | PERM_WRITE):
                    continue
                row = LagRow(group, topic)
                unconsumed = unpulled = 0
                for qid in range(tc.write_queue_nums):
                    broker_off = max(store.get_max_offset_in_queue(topic, qid), 0)
                    commit = offsets.query(group, topic, qid)  # -1: none yet
                    pull = pulls.get((group, topic, qid), -1)  # -1: not pulled since the broker started
                    consumed = commit if commit >= 0 else broker_off
                    row.lag += max(broker_off - consumed, 0)
                    if consumed < broker_off:
                        unconsumed = _earliest(
                            unconsumed, store.get_message_store_timestamp(topic, qid, consumed)
                        )
                    pulled = pull if pull >= 0 else 0
                    row.inflight += max(pulled - (commit if commit >= 0 else pulled), 0)
                    ready_from = pull if pull >= 0 else broker_off
                    row.ready += max(broker_off - ready_from, 0)
                    if pulled < broker_off:
                        unpulled = _earliest(unpulled, store.get_message_store_timestamp(topic, qid, pulled))
                row.earliest_unconsumed_ms = unconsumed
                row.earliest_unpulled_ms = unpulled
                rows.append(row)
        return rows

    def _earliest_store_time(self) -> int:
        """Store time of the oldest message the CommitLog holds (rocketmq_storage_message_reserve_time)."""
        store = self.ctl.store
        try:
            view = store.look_message_by_offset(store.min_phy_offset)
        except Exception:
            return 0
        if view is None:
            return 0
        try:
            sys_flag = _I32.unpack_from(view, 36)[0]
            return _I64.unpack_from(view, store_timestamp_pos(sys_flag))[0]
        except (struct.error, ValueError):
            return 0
        finally:
            view.release()

    # -- scrape thread -------------------------------------------------------------------------
    def collect(self) -> Iterator[Any]:
        snap = self._snap
        if snap is None:
            return
        labels = snap.labels
        names = list(labels)
        base = list(labels.values())
        alive = set(snap.topics)

        def fam(cls, name: str, doc: str, extra: tuple[str, ...] = (), unit: str = ""):
            return cls(name, doc, labels=[*names, *extra], unit=unit)

        # -- stats
        g = fam(GaugeMetricFamily, "rocketmq_topic_number", "Active topic number")
        g.add_metric(base, snap.topic_number)
        yield g
        g = fam(GaugeMetricFamily, "rocketmq_consumer_group_number", "Active subscription group number")
        g.add_metric(base, snap.group_number)
        yield g
        g = fam(GaugeMetricFamily, "rocketmq_broker_permission", "Broker permission")
        g.add_metric(base, snap.broker_permission)
        yield g

        # -- messages in (consume queues read now)
        self.intake.advance(snap.queues)
        self.intake.forget_topics(alive)
        in_labels = ("topic", "message_type", "is_system")
        msgs_in = fam(
            CounterMetricFamily, "rocketmq_messages_in", "Total number of incoming messages", in_labels
        )
        bytes_in = fam(
            CounterMetricFamily, "rocketmq_throughput_in", "Total traffic of incoming messages", in_labels
        )
        size = fam(HistogramMetricFamily, "rocketmq_message_size", "Incoming messages size", in_labels)
        for topic, intake in sorted(self.intake.topics.items()):
            if is_retry_or_dlq(topic) or topic not in alive:
                continue
            values = [
                *base,
                topic,
                snap.topics.get(topic, "normal"),
                flag(is_system_topic(topic, snap.own_names)),
            ]
            msgs_in.add_metric(values, intake.messages)
            bytes_in.add_metric(values, intake.bytes)
            cumulative, total = [], 0
            for bound, n in zip((*SIZE_BUCKETS, float("inf")), intake.buckets, strict=True):
                total += n
                cumulative.append((floatToGoString(bound), total))
            size.add_metric(values, cumulative, intake.bytes)
        yield msgs_in
        yield bytes_in
        yield size

        # -- messages out
        out_labels = ("topic", "consumer_group", "is_retry", "is_system")
        msgs_out = fam(
            CounterMetricFamily, "rocketmq_messages_out", "Total number of outgoing messages", out_labels
        )
        bytes_out = fam(
            CounterMetricFamily, "rocketmq_throughput_out", "Total traffic of outgoing messages", out_labels
        )
        for (group, topic), (n, nbytes) in sorted(snap.out):
            values = [
                *base, topic, group, flag(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
                flag(is_system_topic(topic, snap.own_names) or is_system_group(group)),
            ]  # fmt: skip
            msgs_out.add_metric(values, n)
            bytes_out.add_metric(values, nbytes)
        yield msgs_out
        yield bytes_out

        # -- connections
        g = fam(
            GaugeMetricFamily, "rocketmq_producer_connections", "Producer connections",
            ("language", "version", "protocol_type"),
        )  # fmt: skip
        for (language, version), n in sorted(snap.producers.items()):
            g.add_metric([*base, language, version, "remoting"], n)
        yield g
        g = fam(
            GaugeMetricFamily, "rocketmq_consumer_connections", "Consumer connections",
            ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"),
        )  # fmt: skip
        for (group, language, version, mode), n in sorted(snap.consumers.items()):
            g.add_metric([*base, group, language, version, mode, "remoting", flag(is_system_group(group))], n)
        yield g

        # -- lag
        yield from self._lag_families(snap, fam, base)

        # -- DLQ and transactions
        c = fam(
            CounterMetricFamily, "rocketmq_send_to_dlq_messages", "Consumer send to DLQ messages",
            ("consumer_group", "topic", "is_system"),
        )  # fmt: skip
        for (group, topic), n in sorted(snap.dlq):
            c.add_metric([*base, group, topic, flag(is_system_topic(topic) or is_system_group(group))], n)
        yield c
        for name, doc, rows in (
            ("rocketmq_commit_messages", "Total number of commit messages", snap.tx_commit),
            ("rocketmq_rollback_messages", "Total number of rollback messages", snap.tx_rollback),
        ):
            c = fam(CounterMetricFamily, name, doc, ("topic",))
            for topic, n in sorted(rows):
                c.add_metric([*base, topic], n)
            yield c
        g = fam(GaugeMetricFamily, "rocketmq_half_messages", "Half messages of all topics", ("topic",))
        for topic, n in sorted(snap.half.items()):
            g.add_metric([*base, topic], n)
        yield g

        # -- store
        yield from self._store_families(snap, fam, base)

        # -- remoting
        if self.rpc is not None:
            yield from RpcLatency.families(snap.rpc, labels)
        c = fam(
            CounterMetricFamily, "rocketq_remoting_guard_events",
            "Connections the remoting guard refused or closed (remoting/limits.py), by action and limit",
            ("action", "limit"),
        )  # fmt: skip
        for kind, n in sorted(snap.guard.items()):
            if ":" not in kind:
                continue
            action, _, limit = kind.partition(":")
            c.add_metric([*base, action.strip(), limit.strip()], n)
        yield c
        g = fam(GaugeMetricFamily, "rocketq_remoting_connections", "Open client connections of the broker")
        g.add_metric(base, snap.guard_connections)
        yield g

    def _lag_families(self, snap: BrokerSnapshot, fam, base: list[str]) -> Iterator[Any]:
        lag_labels = ("consumer_group", "topic", "is_retry", "is_system")
        specs = (
            ("rocketmq_consumer_lag_messages", "Consumer lag messages", lambda r: r.lag),
            ("rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)",
             lambda r: snap.now_ms - r.earliest_unconsumed_ms if r.earliest_unconsumed_ms else 0),
            ("rocketmq_consumer_inflight_messages", "Consumer inflight messages", lambda r: r.inflight),
            ("rocketmq_consumer_queueing_latency", "Consumer queueing time (milliseconds)",
             lambda r: snap.now_ms - r.earliest_unpulled_ms if r.earliest_unpulled_ms else 0),
            ("rocketmq_consumer_ready_messages", "Consumer ready messages", lambda r: r.ready),
        )  # fmt: skip
        for name, doc, value in specs:
            g = fam(GaugeMetricFamily, name, doc, lag_labels)
            for row in snap.lag:
                system = is_system_topic(row.topic, snap.own_names) or is_system_group(row.group)
                g.add_metric([*base, row.group, row.topic, "false", flag(system)], max(value(row), 0))
            yield g

    def _store_families(self, snap: BrokerSnapshot, fam, base: list[str]) -> Iterator[Any]:
        store_labels = ("storage_type", "storage_medium")
        sbase = [*base, "local", "disk"]
        try:
            du = shutil.disk_usage(snap.store_dir if os.path.isdir(snap.store_dir) else "/")
            used, total = du.total - du.free, du.total
        except OSError:
            used = total = -1
        if used >= 0:
            g = fam(GaugeMetricFamily, "rocketmq_storage_size", "Broker storage size (bytes)", store_labels)
            g.add_metric(sbase, used)
            yield g
        if total > 0:  # what diskMaxUsedSpaceRatio / diskSpaceCleanForciblyRatio are compared with
            g = fam(
                GaugeMetricFamily, "rocketq_storage_disk_used_ratio",
                "Used fraction of the store's disk (0..1)", store_labels,
            )  # fmt: skip
            g.add_metric(sbase, used / total)
            yield g
        for name, doc, value in (
            ("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", snap.flush_behind),
            ("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", snap.dispatch_behind),
        ):
            g = fam(GaugeMetricFamily, name, doc, store_labels)
            g.add_metric(sbase, value)
            yield g
        if snap.earliest_store_ms > 0:
            g = fam(
                GaugeMetricFamily, "rocketmq_storage_message_reserve_time",
                "Broker message reserve time (milliseconds)", store_labels,
            )  # fmt: skip
            g.add_metric(sbase, max(snap.now_ms - snap.earliest_store_ms, 0))
            yield g
        if snap.timer is not None:
            yield from timer_families(snap.timer, fam, sbase, store_labels)
        sc = snap.store_counters
        c = fam(
            CounterMetricFamily, "rocketq_store_body_crc_mismatch",
            "Records whose body did not match its CRC: reads that skipped one, and ones a restart kept",
            ("where",),
        )  # fmt: skip
        c.add_metric([*base, "read"], sc["crc_read"])
        c.add_metric([*base, "recover"], sc["crc_recover"])
        yield c
        g = fam(GaugeMetricFamily, "rocketq_store_corrupt_records", "Distinct corrupt records found so far")
        g.add_metric(base, sc["crc_records"])
        yield g
        c = fam(CounterMetricFamily, "rocketq_store_put_failures", "Puts the store refused (disk full, ...)")
        c.add_metric(base, sc["put_failures"])
        yield c
        for key, name, doc in (
            ("forced_passes", "rocketq_store_forced_clean_passes", "Forced cleans (disk past its limit)"),
            ("forced_segments", "rocketq_store_forced_clean_segments", "Segments a forced clean deleted"),
            ("forced_messages", "rocketq_store_forced_clean_messages", "Messages a forced clean deleted"),
            ("forced_clean_unconsumed", "rocketq_store_forced_clean_unconsumed_messages",
             "Messages a forced clean deleted before a consumer group had read them"),
        ):  # fmt: skip
            if key in sc:
                c = fam(CounterMetricFamily, name, doc)
                c.add_metric(base, sc[key])
                yield c


def _earliest(current: int, candidate: int) -> int:
    if candidate <= 0:
        return current
    return candidate if current == 0 else min(current, candidate)


# -- timer messages (store/timer.py, from branch v5-broker) -------------------------------------------
# HOOK: rocketmq_timer_enqueue_lag, rocketmq_timer_dequeue_lag and rocketmq_timing_messages come from the
# broker's TimerMessageStore (``ctl.timer``) once timer messages are on this branch; until then
# ``ctl.timer`` does not exist and these series are absent.


def timer_state(timer: Any, store: Any) -> dict[str, Any] | None:
    if timer is None:
        return None
    try:
        enqueue_lag = max(store.get_max_offset_in_queue(TIMER_TOPIC, 0) - timer.enqueue_offset, 0)
        now = int(time.time() * 1000)
        due = 0  # messages in slots whose time has come but which are not delivered yet
        t = timer.read_ms
        steps = 0
        while t <= now and steps < 100_000:
            slot = timer._slot_for(t)
            if timer.wheel_time[slot] == t:
                due += timer.wheel_count[slot]
            t += timer.precision
            steps += 1
        return {"enqueue_lag": enqueue_lag, "dequeue_lag": due, "timing": timer.pending}
    except Exception:
        log.debug("timer metrics unavailable", exc_info=True)
        return None


def timer_families(state: dict[str, Any], fam, sbase: list[str], store_labels: tuple[str, ...]):
    for name, doc, key in (
        ("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", "enqueue_lag"),
        ("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag", "dequeue_lag"),
        ("rocketmq_timing_messages", "Current message number in timing", "timing"),
    ):
        g = fam(GaugeMetricFamily, name, doc, store_labels)
        g.add_metric(sbase, state[key])
        yield g


class BrokerMetrics(ProcessMetrics):
    """The broker's exporter: built by BrokerController.start when metricsExporterType=PROM."""

    def __init__(self, ctl: Any, settings: MetricsSettings, auth: Any) -> None:
        super().__init__(
            ctl.server, settings, lambda rpc: BrokerCollector(ctl, settings, rpc), auth, "broker"
        )

    async def start(self) -> None:
        self.collector.start()  # type: ignore[attr-defined]  # the baseline: before any request is served
        await super().start()
