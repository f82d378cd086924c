"""The master side of classic HA: an asyncio server on haListenPort streaming CommitLog bytes to each slave.

Per connection (RocketMQ's DefaultHAConnection, on the broker's event loop instead of two threads):
- nothing is sent until the slave's first report; a report of 0 (an empty slave) starts the stream at the
  beginning of the master's last CommitLog segment, any other at the reported offset;
- the stream is frames of ≤ haTransferBatchSize bytes read straight from the mapped segments (a frame never
  spans two segments), pushed whenever the log grows (notify()), and a bodySize-0 header after
  haSendHeartbeatInterval of silence;
- each report is the slave's acknowledged offset: it releases SYNC_MASTER sends (ha/waiter.py).

Bounds and checks, which RocketMQ does not have: a first report must be a record boundary inside the
master's log; a later one may never go backwards nor acknowledge bytes this connection has not sent (so no
client can forge acknowledgements beyond what it received); the write buffer is bounded and a slave that
stops reading for haHousekeepingInterval is dropped, as is one that stops reporting. Any violation closes the
connection with a reason in the log and in the HA status; the slave reconnects.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocketq.protocol.record import BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2

from . import auth
from .frames import ReportReader, encode_transfer_header

log = logging.getLogger(__name__)

_SIZE_MAGIC = struct.Struct(">ii")
_PHYS = struct.Struct(">q")
WRITE_HIGH_WATER = 512 * 1024  # bytes queued per slave before the stream pauses for it
LAG_SAMPLES = 4096


def _ms(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(int(q * len(sorted_values)), len(sorted_values) - 1)
    return round(sorted_values[i] * 1000, 3)


MAX_CLOSED_KEPT = 8


@dataclass(slots=True)
class HAConfig:
    heartbeat_s: float = 5.0  # haSendHeartbeatInterval
    housekeeping_s: float = 20.0  # haHousekeepingInterval
    batch: int = 32 * 1024  # haTransferBatchSize
    max_gap: int = 256 * 1024 * 1024  # haMaxGapNotInSync


def no_delay(transport: asyncio.BaseTransport) -> None:
    """TCP_NODELAY: a report or a small frame leaves at once (acknowledgements are on the send path)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


class SlaveConnection(asyncio.Protocol):
    def __init__(self, server: HAServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.addr = "?"
        self.state = "first"  # first | auth -> (proof) -> wait_report -> transfer -> closed
        self.reader = ReportReader()
        self.ack = -1  # the slave's acknowledged offset (its last report)
        self.request_offset = -1
        self.next_transfer = -1
        self.bytes_sent = 0
        now = time.monotonic()
        self.connected_at = now
        self.last_read = now
        self.last_write = now
        self.last_caught_up = now
        self.paused_since: float | None = None
        self.close_reason = ""
        self.access_key = ""
        self._auth_buf = b""
        self._nonce = b""
        self._rate_mark = (now, 0)
        self.rate = 0.0  # bytes/s sent, over the last second or so
        # (send time, end offset) of each burst streamed, until acknowledged: ack - send time is the
        # replication lag of those bytes (kept for the last LAG_SAMPLES acknowledgements)
        self._sent_marks: deque[tuple[float, int]] = deque(maxlen=65536)
        self.lag_samples: deque[float] = deque(maxlen=LAG_SAMPLES)

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        no_delay(transport)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[union-attr]
        a = self.server.auth
        if a is not None and not a.is_white(self.addr.rpartition(":")[0].strip("[]")):
            self.state = "auth"  # its first bytes must be the HELLO
        else:
            self.state = "first"  # a classic report, or a HELLO (answered: no proof needed)
        self.server._added(self)
        log.info("HA: slave %s connected", self.addr)

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        try:
            if self.state != "transfer" and self.state != "wait_report":
                if self.state == "closed":
                    return
                data = self._handshake(data)
                if not data:
                    return
            offset = self.reader.feed(data)
            if offset is not None:
                self._on_report(offset)
        except Exception as exc:  # a bug must cost this connection, not the broker
            log.exception("HA: handling %s's bytes failed", self.addr)
            self.close(f"internal error: {exc!r}")

    def pause_writing(self) -> None:
        self.paused_since = time.monotonic()

    def resume_writing(self) -> None:
        self.paused_since = None
        self.pump()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state != "closed":
            self.state = "closed"
            if not self.close_reason:
                self.close_reason = f"connection lost ({exc})" if exc else "closed by the slave"
            log.info("HA: slave %s gone: %s", self.addr, self.close_reason)
        self.server._removed(self)

    # -- handshake (ha/auth.py) --------------------------------------------------------------------
    def _handshake(self, data: bytes) -> bytes:
        """States "first" (a HELLO or the first report), "auth" (ACL: a HELLO is required) and "proof":
        consume the handshake bytes; returns the report bytes that follow them (b"" if none yet)."""
        buf = self._auth_buf + data
        self._auth_buf = b""
        if self.state in ("first", "auth"):
            if len(buf) < 8:
                self._auth_buf = buf
                return b""
            if buf[:8] != auth.HELLO:
                if self.state == "auth":
                    self.close("ACL is on and the slave did not authenticate (an Apache RocketMQ slave needs "
                               "its address in globalWhiteRemoteAddresses)")  # fmt: skip
                    return b""
                self.state = "wait_report"
                return buf
            required = self.state == "auth"
            self._nonce = auth.new_nonce()
            self.transport.write(auth.encode_challenge(required, self._nonce))  # type: ignore[union-attr]
            buf = buf[8:]
            if not required:
                self.state = "wait_report"
                return buf
            self.state = "proof"
        try:
            proof = auth.parse_proof(buf)
        except auth.HAAuthError as exc:
            self.close(str(exc))
            return b""
        if proof is None:
            if len(buf) > 512:
                self.close("HA proof too long")
            else:
                self._auth_buf = buf
            return b""
        access_key, mac, used = proof
        a = self.server.auth
        reason = a.check(access_key, mac, self._nonce) if a is not None else "no ACL to check against"
        if reason is not None:
            self.close(f"HA authentication refused: {reason}")
            return b""
        self.access_key = access_key
        self.state = "wait_report"
        log.info("HA: slave %s authenticated as %s", self.addr, access_key)
        return buf[used:]

    # -- reports -----------------------------------------------------------------------------------
    def _on_report(self, offset: int) -> None:
        srv = self.server
        if self.state == "wait_report":
            reason = srv.check_start(offset)
            if reason is not None:
                self.close(reason)
                return
            self.request_offset = offset
            self.ack = offset
            self.next_transfer = srv.start_offset(offset)
            self.state = "transfer"
            log.info("HA: slave %s asks for %d; streaming from %d", self.addr, offset, self.next_transfer)
            srv.on_ack(self)
            self.pump()
            return
        if offset < self.ack:
            self.close(f"report went backwards ({offset} < {self.ack})")
            return
        if offset > self.next_transfer and offset > self.request_offset:
            self.close(f"acknowledged {offset}, beyond the {self.next_transfer} bytes streamed to it")
            return
        if offset != self.ack:
            self.ack = offset
            marks = self._sent_marks
            if marks and marks[0][1] <= offset:
                now = time.monotonic()
                while marks and marks[0][1] <= offset:
                    self.lag_samples.append(now - marks.popleft()[0])
            srv.on_ack(self)

    # -- stream ------------------------------------------------------------------------------------
    def pump(self) -> None:
        """Send what the log holds beyond next_transfer, until caught up or the buffer is full."""
        if self.state != "transfer" or self.paused_since is not None:
            return
        t = self.transport
        read = self.server.read_chunk
        header = encode_transfer_header
        sent = False
        while self.paused_since is None:
            chunk = read(self.next_transfer)
            if chunk is None:
                break
            n = len(chunk)
            # The view goes to the transport as is and is dropped, not released: uvloop may send from it
            # after writelines() returns, and the segment stays mapped while a view of it exists
            # (a segment retention deletes meanwhile is unmapped once the last view is gone).
            t.writelines((header(self.next_transfer, n), chunk))  # type: ignore[union-attr]
            del chunk
            self.next_transfer += n
            self.bytes_sent += n
            sent = True
        if sent:
            now = self.last_write = time.monotonic()
            self._sent_marks.append((now, self.next_transfer))

    def tick(self, now: float, cfg: HAConfig) -> None:
        """Heartbeat and housekeeping, once a second."""
        if self.state == "closed":
            return
        if now - self.last_read > cfg.housekeeping_s:
            self.close(f"no report for {now - self.last_read:.1f} s (haHousekeepingInterval)")
            return
        if self.paused_since is not None and now - self.paused_since > cfg.housekeeping_s:
            self.close(f"not reading for {now - self.paused_since:.1f} s (haHousekeepingInterval)")
            return
        if self.state == "transfer":
            self.pump()
            if self.paused_since is None and now - self.last_write >= cfg.heartbeat_s:
                self.transport.write(encode_transfer_header(self.next_transfer, 0))  # type: ignore[union-attr]
                self.last_write = now
        t0, b0 = self._rate_mark
        if now - t0 >= 1.0:
            self.rate = (self.bytes_sent - b0) / (now - t0)
            self._rate_mark = (now, self.bytes_sent)

    def close(self, reason: str) -> None:
        if self.state == "closed":
            return
        self.close_reason = reason
        log.warning("HA: dropping slave %s: %s", self.addr, reason)
        self.state = "closed"
        if self.transport is not None:
            self.transport.abort()

    def info(self, master_max: int, max_gap: int) -> dict[str, Any]:
        now = time.monotonic()
        lags = sorted(self.lag_samples)
        diff = max(master_max - self.ack, 0) if self.ack >= 0 else master_max
        return {
            "addr": self.addr,
            "slaveAckOffset": self.ack,
            "diff": diff,
            "inSync": self.state == "transfer" and diff < max_gap,
            "transferredByteInSecond": int(self.rate),
            "transferFromWhere": self.next_transfer,
            # rocketq: how long the slave has not had everything the master has (0 when caught up)
            "lagMillis": 0 if diff == 0 else int((now - self.last_caught_up) * 1000),
            "state": self.state,
            "accessKey": self.access_key,
            # rocketq: from streaming bytes to their acknowledgement, over the last acknowledgements
            "ackLagMillisP50": _ms(lags, 0.50),
            "ackLagMillisP99": _ms(lags, 0.99),
            "ackLagMillisMax": _ms(lags, 1.0),
        }


class HAServer:
    def __init__(
        self,
        store: Any,
        cfg: HAConfig,
        master_auth: auth.MasterAuth | None = None,
        on_ack: Callable[[list[int]], None] | None = None,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.auth = master_auth
        self.on_ack_change = on_ack
        self.connections: list[SlaveConnection] = []
        self.on_connections: Callable[[bool], None] | None = None  # fn(any slave connected), on changes
        self.recently_closed: list[dict[str, Any]] = []  # the last few dropped slaves, with the reason
        self._server: asyncio.base_events.Server | None = None
        self._tick: asyncio.Task[None] | None = None
        self._notify_pending = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(lambda: SlaveConnection(self), host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        self._tick = self.loop.create_task(self._ticker())

    async def close(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
        if self._server is not None:
            self._server.close()
        for c in list(self.connections):
            c.close("the master is shutting down")
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except TimeoutError:
                pass

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for c in list(self.connections):
                try:
                    c.tick(now, self.cfg)
                except Exception:
                    log.exception("HA: housekeeping of %s failed", c.addr)
                    c.close("internal error")

    def _added(self, c: SlaveConnection) -> None:
        self.connections.append(c)
        if len(self.connections) == 1 and self.on_connections is not None:
            self.on_connections(True)

    def _removed(self, c: SlaveConnection) -> None:
        if c in self.connections:
            self.connections.remove(c)
            at = int(time.time() * 1000)
            self.recently_closed.append({"addr": c.addr, "reason": c.close_reason, "at": at})
            del self.recently_closed[:-MAX_CLOSED_KEPT]
            if self.on_ack_change is not None:
                self.on_ack_change(self.acks())
            if not self.connections and self.on_connections is not None:
                self.on_connections(False)

    # -- the log -----------------------------------------------------------------------------------
    def notify(self) -> None:
        """The log grew: stream it (once per loop turn however many appends there were)."""
        if self.connections and not self._notify_pending and self.loop is not None:
            self._notify_pending = True
            self.loop.call_soon(self._pump_all)

    def _pump_all(self) -> None:
        self._notify_pending = False
        for c in self.connections:
            c.pump()

    def read_chunk(self, offset: int) -> memoryview | None:
        mf = self.store.commit_log.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        n = min(mf.wrote_position - pos, self.cfg.batch)
        if n <= 0:
            return None
        try:
            return mf.slice(pos, n)
        except ValueError:  # unmapped concurrently (retention)
            return None

    def check_start(self, offset: int) -> str | None:
        """None if a slave may start from offset; else why not."""
        if offset == 0:
            return None
        cl = self.store.commit_log
        max_off = cl.max_offset
        if offset < 0:
            return f"reported a negative offset {offset}"
        if offset > max_off:
            return (f"the slave's log ({offset}) is ahead of the master's ({max_off}): it diverged; "
                    "rebuild the slave's store or bring back the master's log")  # fmt: skip
        if offset == max_off:
            return None
        if offset < cl.min_offset:
            return (f"the slave needs offset {offset} but the master's log starts at {cl.min_offset} "
                    "(deleted by retention): empty the slave's store so it starts over")  # fmt: skip
        if offset % cl.file_size == 0:
            return None
        mf = cl.mfq.find_mapped_file_by_offset(offset)
        pos = offset - mf.file_from_offset if mf is not None else -1
        if mf is None or pos + 36 > mf.wrote_position:
            return f"offset {offset} is not readable on the master"
        _, magic = _SIZE_MAGIC.unpack_from(mf.view, pos)
        if magic == BLANK_MAGIC_CODE:
            return None
        if magic in (MAGIC_CODE_V1, MAGIC_CODE_V2) and _PHYS.unpack_from(mf.view, pos + 28)[0] == offset:
            return None
        return f"the slave's log ends at {offset}, inside a master record: the logs diverged"

    def start_offset(self, requested: int) -> int:
        if requested != 0:
            return requested
        max_off = self.store.commit_log.max_offset
        return max_off - max_off % self.store.commit_log.file_size

    # -- acknowledgements --------------------------------------------------------------------------
    def acks(self) -> list[int]:
        return [c.ack for c in self.connections if c.state == "transfer"]

    def on_ack(self, c: SlaveConnection) -> None:
        master_max = self.store.commit_log.max_offset
        if c.ack >= master_max:
            c.last_caught_up = time.monotonic()
        if self.on_ack_change is not None:
            self.on_ack_change(self.acks())

    def in_sync_count(self, master_put_where: int) -> int:
        """Slaves streaming and within haMaxGapNotInSync of master_put_where."""
        gap = self.cfg.max_gap
        return sum(1 for c in self.connections if c.state == "transfer" and master_put_where - c.ack < gap)

    def status(self) -> dict[str, Any]:
        master_max = self.store.commit_log.max_offset
        infos = [c.info(master_max, self.cfg.max_gap) for c in self.connections if c.state != "closed"]
        return {
            "masterCommitLogMaxOffset": master_max,
            "inSyncSlaveNums": sum(1 for i in infos if i["inSync"]),
            "haConnectionInfo": infos,
            "recentlyDropped": list(self.recently_closed),
        }
