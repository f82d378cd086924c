"""What one server lets its peers make it hold before a request is even authenticated.

A peer can make a server buffer the start of a frame (up to the frame limit), keep a connection open, and
open many connections. :class:`ServerLimits` bounds each of these, :class:`ConnectionGuard` enforces them for
one RemotingServer:

* buffered bytes: the partial frames of all connections together. Above ``max_buffered_bytes`` a connection
  that holds a partial frame stops being read (back-pressure: the kernel's socket buffers fill, then the
  peer's sends block) until the total falls again; a read that takes the total past that plus one frame
  closes its connection. A connection never holds more than one frame (``max_frame_size``).
* a frame deadline: once a frame's first byte has arrived, the whole frame must arrive within
  ``frame_timeout_s`` (counted from that byte, also while the frame waits for buffer room), so a peer that
  dribbles a byte now and then cannot keep a half frame alive.
* connections: at most ``max_connections`` in total and ``max_connections_per_address`` from one address;
  beyond them a new connection is closed at once.

What the guard closes or refuses is logged as one WARNING line per interval with counts (the first event
after a quiet interval at once), never a line per connection.
"""

from __future__ import annotations

import logging
import resource
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Protocol

from rocketq.protocol.frame import MAX_FRAME_SIZE


class Channel(Protocol):
    """What the guard uses of a server connection (remoting.channel.Channel; not imported: no cycle)."""

    remote_addr: str
    _held: int
    _read_block: int

    def close_now(self) -> None: ...

    def _block_reading(self, reason: int) -> None: ...

    def _unblock_reading(self, reason: int) -> None: ...


log = logging.getLogger("rocketq.remoting.guard")

MIB = 1024 * 1024
_READ_CHUNK = 256 * 1024  # the most one read brings (asyncio's and uvloop's read size)

# config key -> (attribute, type, default); the same keys in broker.conf and namesrv.conf
LIMIT_KEYS: dict[str, tuple[str, type, Any]] = {
    "serverFrameMaxLength": ("max_frame_size", int, MAX_FRAME_SIZE),
    "serverFrameReadTimeoutMillis": ("frame_timeout_ms", int, 30_000),
    "serverMaxBufferedBytes": ("max_buffered_bytes", int, 128 * MIB),
    "serverMaxConnections": ("max_connections", int, 10_000),
    "serverMaxConnectionsPerAddress": ("max_connections_per_address", int, 1_000),
    "serverRejectLogIntervalSeconds": ("log_interval_s", int, 60),
}


class LimitsError(ValueError):
    pass


@dataclass(slots=True)
class ServerLimits:
    max_frame_size: int = MAX_FRAME_SIZE
    frame_timeout_ms: int = 30_000
    max_buffered_bytes: int = 128 * MIB
    max_connections: int = 10_000
    max_connections_per_address: int = 1_000
    log_interval_s: int = 60

    @classmethod
    def from_config(cls, get: Any) -> ServerLimits:
        """From a config mapping of the LIMIT_KEYS names (``get(key)`` → value or None)."""
        limits = cls()
        for key, (attr, typ, _) in LIMIT_KEYS.items():
            value = get(key)
            if value is not None:
                try:
                    setattr(limits, attr, typ(value))
                except (TypeError, ValueError):
                    raise LimitsError(f"{key}: expected an integer, got {value!r}") from None
        limits.validate()
        return limits

    def validate(self) -> None:
        if not 1024 <= self.max_frame_size <= MAX_FRAME_SIZE * 8:
            raise LimitsError(f"serverFrameMaxLength must be in 1024..{MAX_FRAME_SIZE * 8}")
        if self.frame_timeout_ms <= 0:
            raise LimitsError("serverFrameReadTimeoutMillis must be > 0")
        if self.max_buffered_bytes < self.max_frame_size:
            raise LimitsError("serverMaxBufferedBytes must be at least serverFrameMaxLength")
        if self.max_connections <= 0 or self.max_connections_per_address <= 0:
            raise LimitsError("serverMaxConnections and serverMaxConnectionsPerAddress must be > 0")
        if self.log_interval_s <= 0:
            raise LimitsError("serverRejectLogIntervalSeconds must be > 0")

    @property
    def frame_timeout_s(self) -> float:
        return self.frame_timeout_ms / 1000.0


class EventSummary:
    """Counts events (a closed or refused connection and why) and logs them as one WARNING line per interval:
    the first event after a quiet interval at once, the rest in the summary at the interval's end."""

    def __init__(self, interval_s: float, what: str, logger: logging.Logger = log) -> None:
        self.interval_s = interval_s
        self.what = what
        self.log = logger
        self.counts: Counter[str] = Counter()
        self.addrs: Counter[str] = Counter()
        self.example: dict[str, str] = {}
        self.total: Counter[str] = Counter()  # since start, for stats
        self._last = -1e18

    def note(self, kind: str, addr: str, detail: str = "") -> None:
        self.counts[kind] += 1
        self.total[kind] += 1
        self.addrs[addr.rpartition(":")[0] or addr] += 1
        if kind not in self.example:
            self.example[kind] = f"{addr}: {detail}" if detail else addr
        self.log.debug("%s %s: %s %s", self.what, addr, kind, detail)
        self.flush_if_due()

    def flush_if_due(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.counts and now - self._last >= self.interval_s:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if not self.counts:
            return
        self._last = time.monotonic() if now is None else now
        kinds = ", ".join(f"{k} ×{n} (e.g. {self.example[k]})" for k, n in self.counts.most_common())
        top = ", ".join(f"{a} ×{n}" for a, n in self.addrs.most_common(3))
        self.log.warning(
            "%s: %d connection(s) closed or refused in the last %gs: %s; top peers: %s",
            self.what,
            sum(self.counts.values()),
            self.interval_s,
            kinds,
            top,
        )
        self.counts.clear()
        self.addrs.clear()
        self.example.clear()


def raise_fd_limit(wanted: int) -> int:
    """Raise the soft open-files limit towards ``wanted`` (not past the hard one); returns the soft one."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        return soft if soft != resource.RLIM_INFINITY else wanted
    except (ValueError, OSError):
        return wanted


_FD_RESERVE = 512  # descriptors kept for the store's files, outgoing connections, logs


class ConnectionGuard:
    """Enforces ServerLimits for the channels of one server (event loop thread only)."""

    def __init__(self, limits: ServerLimits, name: str = "remoting") -> None:
        self.limits = limits
        self.name = name
        self.max_connections = limits.max_connections
        self.buffered = 0  # bytes of partial frames, all connections
        self.hard_buffered = limits.max_buffered_bytes + limits.max_frame_size
        self.connections = 0
        self.per_address: Counter[str] = Counter()
        # channels holding a partial frame -> when its first byte came; insertion order = oldest first
        self.partial: dict[Channel, float] = {}
        self.waiting: deque[Channel] = deque()  # paused for buffer room, resumed first-come first-served
        self.events = EventSummary(limits.log_interval_s, f"{name} connection guard")

    def fit_fd_limit(self) -> None:
        """At server start: make room for max_connections descriptors, or lower it to what the process has."""
        wanted = self.limits.max_connections + _FD_RESERVE
        soft = raise_fd_limit(wanted)
        if soft < wanted:
            self.max_connections = max(16, soft - _FD_RESERVE)
            log.warning(
                "%s: open-files limit %d: at most %d connections (serverMaxConnections=%d)",
                self.name,
                soft,
                self.max_connections,
                self.limits.max_connections,
            )

    # -- connections -------------------------------------------------------------------------
    def admit(self, ch: Channel, host: str) -> bool:
        if self.connections >= self.max_connections:
            self.events.note("refused: serverMaxConnections", ch.remote_addr, f"{self.max_connections} open")
            return False
        if self.per_address[host] >= self.limits.max_connections_per_address:
            limit = self.limits.max_connections_per_address
            self.events.note("refused: serverMaxConnectionsPerAddress", ch.remote_addr, f"{limit} open")
            return False
        self.connections += 1
        self.per_address[host] += 1
        return True

    def release(self, ch: Channel, host: str) -> None:
        self.connections -= 1
        n = self.per_address[host] - 1
        if n > 0:
            self.per_address[host] = n
        else:
            del self.per_address[host]
        held = ch._held
        if held:
            ch._held = 0
            self.buffered -= held
            self.partial.pop(ch, None)
        if ch._read_block & _BUDGET:
            try:
                self.waiting.remove(ch)
            except ValueError:
                pass
        if held:
            self._resume_waiting()

    # -- buffered bytes ----------------------------------------------------------------------
    def held_changed(self, ch: Channel, held: int, new_frame: bool, now: float) -> None:
        """ch now holds ``held`` bytes of a partial frame (was ch._held); new_frame: frames completed in this
        read, so a partial frame that is left started in it."""
        old = ch._held
        ch._held = held
        self.buffered += held - old
        partial = self.partial
        if held == 0:
            partial.pop(ch, None)
        elif old == 0 or new_frame:
            partial.pop(ch, None)
            partial[ch] = now
        if self.buffered > self.limits.max_buffered_bytes:
            if self.buffered > self.hard_buffered and held > old:
                limit = self.limits.max_buffered_bytes
                self.events.note(
                    "closed: serverMaxBufferedBytes", ch.remote_addr, f"{self.buffered} > {limit} + one frame"
                )
                ch.close_now()
            elif held and not ch._read_block & _BUDGET:
                ch._block_reading(_BUDGET)
                self.waiting.append(ch)
        elif held < old:
            self._resume_waiting()

    def _resume_waiting(self) -> None:
        room = self.limits.max_buffered_bytes - self.buffered
        waiting = self.waiting
        while waiting and room > 0:
            ch = waiting.popleft()
            ch._unblock_reading(_BUDGET)
            room -= _READ_CHUNK  # what its next read may bring

    # -- deadlines ---------------------------------------------------------------------------
    def expire_frames(self, now: float) -> int:
        """Close connections whose partial frame is older than the frame deadline; returns how many."""
        deadline = now - self.limits.frame_timeout_s
        expired = []
        for ch, started in self.partial.items():
            if started > deadline:
                break
            expired.append(ch)
        for ch in expired:
            self.partial.pop(ch, None)
            self.events.note(
                "closed: serverFrameReadTimeoutMillis",
                ch.remote_addr,
                f"{ch._held} bytes of a frame after {self.limits.frame_timeout_ms} ms",
            )
            ch.close_now()
        return len(expired)

    def stats(self) -> dict[str, int]:
        return {
            "connections": self.connections,
            "bufferedBytes": self.buffered,
            "waitingForBuffer": len(self.waiting),
            **{k: v for k, v in self.events.total.items()},
        }


# Channel._read_block bits: why a server connection is not being read
_WRITE = 1  # the peer does not read our responses
_BACKLOG = 2  # pipelined requests still waiting for their turn
_BUDGET = 4  # waiting for buffer room (ConnectionGuard)
