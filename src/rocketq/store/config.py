"""Store configuration (names and defaults follow RocketMQ's MessageStoreConfig)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum


class FlushDiskType(Enum):
    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class BrokerRole(Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass
class StoreConfig:
    store_path_root_dir: str  # consumequeue/, index/, checkpoint, abort, config/ live here
    store_path_commitlog: str | None = None  # default <root>/commitlog
    mapped_file_size_commitlog: int = 1 << 30
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commitlog: int = 500  # ms
    flush_commitlog_least_pages: int = 4
    flush_commitlog_thorough_interval: int = 10_000  # ms
    sync_flush_timeout: int = 5_000  # ms
    max_message_size: int = 4 * 1024 * 1024
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_warning_level_ratio: int = 90  # % used: above it the store refuses writes
    disk_space_clean_forcibly_ratio: int = 85  # % used: above it unexpired CommitLog files are deleted too
    clean_file_forcibly_enable: bool = True
    clean_resource_interval: int = 10_000  # ms between retention and disk checks
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    message_index_enable: bool = True
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    # --- beyond the contract (RocketMQ names) ---
    flush_interval_consume_queue: int = 1_000  # ms
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000  # ms
    check_crc_on_recover: bool = True
    # rocketq: never serve a record whose body fails its CRC (pulls, lookups by offset or key: integrity.py)
    check_crc_on_read: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    preallocate_commitlog: bool = True  # posix_fallocate new segments: disk full fails the roll, not a write
    # Keep the CommitLog's blocks this far ahead of the writer written with zeros (store/warm.py): on the
    # device under SYNC_FLUSH, in the page cache under ASYNC_FLUSH (when it stores through the mapping)
    warm_ahead_enable: bool = True
    # ASYNC_FLUSH: the page-cache zeros only with this on too. Off by default: in the broker, pinned to one
    # CPU, writing the zeros cost the warming thread about what the first stores' page faults cost the loop
    # (bench/thread_probe.py, tier B: 4 KiB and 128 B level, 64 KiB W=64 6.2 k against 7.0 k msg/s)
    warm_ahead_async_enable: bool = False
    warm_ahead_bytes: int = 8 << 20
    warm_ahead_max_rate: int = 0  # SYNC_FLUSH: bytes/s of appends above which warm-ahead pauses (0: never)
    # ASYNC_FLUSH: write records with pwrite (runs of pipelined sends staged into one write) instead of
    # storing through the mapping, and start writeback of every this-many new bytes right behind the
    # writer (store/writeback.py); 0 keeps the store through the mapping and the interval flush only.
    async_writeback_bytes: int = 0
    # SYNC_FLUSH under a broker: submit each group-commit fdatasync through Linux native AIO from the event
    # loop (store/loop_flush.py) instead of running it in a thread; falls back to the thread when the
    # kernel or file system does not take it.
    sync_flush_native_aio: bool = True
    # Release the CommitLog's page cache this many bytes behind the flushed end, so that new writes get
    # recycled pages instead of fresh ones (store/cache_release.py); 0 leaves the page cache to the kernel.
    commitlog_page_cache_window: int = 256 << 20

    def __post_init__(self) -> None:
        if isinstance(self.flush_disk_type, str):
            self.flush_disk_type = FlushDiskType(self.flush_disk_type)
        if isinstance(self.broker_role, str):
            self.broker_role = BrokerRole(self.broker_role)
        if self.consume_queue_unit_count <= 0:
            raise ValueError("mapped_file_size_consume_queue must hold at least one 20-byte unit")

    @property
    def commitlog_dir(self) -> str:
        return self.store_path_commitlog or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    @property
    def consume_queue_unit_count(self) -> int:
        return self.mapped_file_size_consume_queue // 20

    @property
    def consume_queue_file_size(self) -> int:
        """Rounded down to whole 20-byte units."""
        return self.consume_queue_unit_count * 20

    def delay_level_table_ms(self) -> list[int]:
        """messageDelayLevel as milliseconds, level 1 first."""
        unit_ms = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        out = []
        for item in self.message_delay_level.split():
            out.append(int(item[:-1]) * unit_ms[item[-1]])
        return out
