"""Values exchanged between the broker and the store (docs/architecture.md)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol


class PutMessageStatus(Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9


class GetMessageStatus(Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


@dataclass(slots=True)
class MessageToStore:
    """One message as the broker hands it over (already validated)."""

    topic: str
    queue_id: int
    body: bytes  # as stored (maybe compressed; sys_flag says)
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0  # ms
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # None: Java String.hashCode of TAGS (0 without); for SCHEDULE_TOPIC_XXXX the store computes the delivery
    # time from DELAY and the store timestamp, exactly as a rebuild from the CommitLog would.
    tags_code: int | None = None
    # Pre-encoded property string (UTF-8, pairs joined by \x02, no trailing separator): when set the store
    # writes it as is and ignores `properties` (the broker's send path skips a parse/serialise round trip)
    properties_raw: bytes | None = None


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    wrote_offset: int = -1  # phys offset of the first record
    wrote_bytes: int = 0
    msg_ids: list[str] = field(default_factory=list)  # offsetMsgId hex per record
    queue_offset: int = -1  # first
    msg_num: int = 0
    store_timestamp: int = 0
    # SYNC_FLUSH only: resolves True once durable, False on syncFlushTimeout (-> FLUSH_DISK_TIMEOUT)
    flush_future: Future[bool] | None = None
    # SYNC_FLUSH with a flush listener (MessageStore.set_flush_listener): instead of flush_future, the
    # CommitLog offset the caller must see flushed (listener's flushed_offset >= this) before acknowledging
    flush_offset: int = 0

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool: ...

    def is_matched_by_commit_log(self, record: memoryview) -> bool: ...


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    buffers: list[memoryview] = field(default_factory=list)  # whole records, slices of the mapped files
    message_count: int = 0
    buffer_total_size: int = 0
    # per buffer: queue offset (lets the broker report/lookup without decoding)
    queue_offsets: list[int] = field(default_factory=list)

    def release(self) -> None:
        """Drop the views so retention can unmap deleted files. The buffers are unusable afterwards."""
        for b in self.buffers:
            b.release()
        self.buffers = []


@dataclass(slots=True)
class QueryMessageResult:
    buffers: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.buffers)

    def release(self) -> None:
        for b in self.buffers:
            b.release()
        self.buffers = []
