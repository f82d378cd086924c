"""The slave side of classic HA (RocketMQ's DefaultHAClient), on the broker's event loop.

One connection to the master's HA address at a time. On connect the slave reports where its log ends (the
last whole record: a partial one from the previous connection is dropped) and from then on appends every
frame through the store's raw-append API (store/replica.py), which validates and dispatches the records;
after each read it reports its new end, and every haSendHeartbeatInterval anyway. A frame whose offset is
not where the log ends, a frame over the size limit or a chunk the store refuses drops the connection (the
reason goes to the log and the HA status); so does haHousekeepingInterval without a byte from the master.
It reconnects after haSendHeartbeatInterval (5 s by default, RocketMQ's fixed pause) to the address it was
given: haMasterAddress if configured, else the one the NameServer returns when the slave registers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rocketq.store.replica import ReplicaAppender, ReplicaError

from . import auth
from .frames import HAProtocolError, TransferReader, encode_report
from .master import HAConfig, no_delay

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0


class _Link(asyncio.Protocol):
    def __init__(self, client: HAClient) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        no_delay(transport)

    def data_received(self, data: bytes) -> None:
        self.client._on_data(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


@dataclass
class SlaveStatus:
    state: str = "idle"  # idle (no master address) | connecting | handshake | transfer | retry_wait
    last_error: str = ""
    connects: int = 0
    last_read_ms: int = 0
    last_write_ms: int = 0
    bytes_received: int = 0
    history: list[str] = field(default_factory=list)


class HAClient:
    def __init__(
        self, appender: ReplicaAppender, cfg: HAConfig, credentials: auth.Credentials | None = None
    ) -> None:
        self.appender = appender
        self.cfg = cfg
        self.credentials = credentials
        self.master_ha_addr: str | None = None
        self.master_addr: str | None = None  # the master's remoting address (metadata sync, status)
        self.pinned = False  # haMasterAddress given: the NameServer's answer does not move it
        self.status = SlaveStatus()
        self._link: _Link | None = None
        self._reader = TransferReader()
        self._reported = -1
        self._last_report = 0.0
        self._last_read = 0.0
        self._rate_mark = (0.0, 0)
        self.rate = 0.0
        self._challenge: asyncio.Future[tuple[bool, bytes]] | None = None
        self._hs_buf = b""
        self._no_auth: set[str] = set()  # masters that did not answer the HELLO (Apache RocketMQ)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False

    # -- control -----------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        link = self._link
        if link is not None and link.transport is not None:
            link.transport.abort()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    def update_master(self, ha_addr: str | None, master_addr: str | None = None, pin: bool = False) -> None:
        """A master address from haMasterAddress (pin) or from a register-broker result."""
        if master_addr:
            self.master_addr = master_addr
        if pin:
            self.pinned = True
        elif self.pinned or not ha_addr:
            return  # a lost master keeps its address: the slave goes on trying it (RocketMQ does)
        if ha_addr != self.master_ha_addr:
            log.info("HA: master HA address %s -> %s", self.master_ha_addr, ha_addr)
            self.master_ha_addr = ha_addr
            self._wake.set()
            link = self._link
            if link is not None and link.transport is not None:
                link.transport.abort()  # follow the new master now

    # -- session -----------------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._closed:
            addr = self.master_ha_addr
            if not addr:
                self.status.state = "idle"
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), 1.0)
                except TimeoutError:
                    pass
                continue
            retry_now = False
            try:
                retry_now = await self._session(addr)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every failure is a reconnect, never a crash of the broker
                self._error(f"{type(exc).__name__}: {exc}")
            finally:
                link, self._link = self._link, None
                if link is not None and link.transport is not None:
                    link.transport.abort()
            if self._closed or retry_now:
                continue
            self.status.state = "retry_wait"
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), min(self.cfg.heartbeat_s, 5.0))
            except TimeoutError:
                pass

    async def _session(self, addr: str) -> bool:
        """One connection; returns True to reconnect at once (the master turned out to lack HA auth)."""
        host, _, port = addr.rpartition(":")
        loop = asyncio.get_running_loop()
        self.status.state = "connecting"
        try:
            _, link = await asyncio.wait_for(
                loop.create_connection(lambda: _Link(self), host.strip("[]"), int(port)), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError, ValueError) as exc:
            self._error(f"connect to master {addr} failed: {exc}")
            return False
        self._link = link
        self.status.connects += 1
        self._reader = TransferReader()
        self.appender.drop_pending()
        self._reported = -1
        self._last_read = time.monotonic()
        self.status.last_read_ms = int(time.time() * 1000)
        t = link.transport
        assert t is not None
        if self.credentials is not None and addr not in self._no_auth:
            self.status.state = "handshake"
            self._hs_buf = b""
            self._challenge = loop.create_future()
            t.write(auth.HELLO)
            try:
                required, nonce = await asyncio.wait_for(asyncio.shield(self._challenge), auth.AUTH_TIMEOUT_S)
            except TimeoutError:
                if link.lost.done():
                    self._error(f"master {addr} closed the connection during the HA handshake")
                    return False
                log.warning("HA: master %s did not answer the HA hello within %.0f s: a master without "
                            "rocketq's HA authentication (Apache RocketMQ); reconnecting without it",
                            addr, auth.AUTH_TIMEOUT_S)  # fmt: skip
                self._no_auth.add(addr)
                return True
            finally:
                self._challenge = None
            if required:
                t.write(auth.encode_proof(self.credentials, nonce))
            rest, self._hs_buf = self._hs_buf, b""
        else:
            rest = b""
        self.status.state = "transfer"
        self._report(t, force=True)
        log.info("HA: connected to master %s, reported %d", addr, self.appender.max_offset)
        if rest:
            self._on_data(link, rest)
        while not link.lost.done():
            try:
                await asyncio.wait_for(asyncio.shield(link.lost), 1.0)
            except TimeoutError:
                pass
            if link.lost.done() or self._closed:
                break
            self._tick(link)
        if self.status.state == "transfer":
            self._error(f"connection to master {addr} lost")
        return False

    def _tick(self, link: _Link) -> None:
        now = time.monotonic()
        t = link.transport
        if t is None:
            return
        if now - self._last_read > self.cfg.housekeeping_s:
            quiet = now - self._last_read
            self._drop(link, f"nothing from the master for {quiet:.1f} s (haHousekeepingInterval)")
            return
        if now - self._last_report >= self.cfg.heartbeat_s:
            self._report(t, force=True)
        t0, b0 = self._rate_mark
        if now - t0 >= 1.0:
            self.rate = (self.status.bytes_received - b0) / (now - t0) if t0 else 0.0
            self._rate_mark = (now, self.status.bytes_received)

    def _on_data(self, link: _Link, data: bytes) -> None:
        if self._link is not link or link.transport is None:
            return
        self._last_read = time.monotonic()
        self.status.last_read_ms = int(time.time() * 1000)
        if self._challenge is not None:
            buf = self._hs_buf + data
            try:
                parsed = auth.parse_challenge(buf)
            except auth.HAAuthError as exc:
                self._drop(link, str(exc))
                return
            if parsed is None:
                self._hs_buf = buf
                return
            self._hs_buf = buf[auth.CHALLENGE_SIZE :]  # frames that follow, handled after the proof
            if not self._challenge.done():
                self._challenge.set_result(parsed)
            return
        self.status.bytes_received += len(data)
        reader = self._reader
        app = self.appender
        reader.feed(data)
        try:
            for offset, body in reader.frames():
                empty = app.cl.mfq.last() is None
                if not empty and offset != app.received_end:
                    raise HAProtocolError(
                        f"the master pushed offset {offset}, this slave's log ends at {app.received_end}"
                    )
                if len(body):
                    app.append(offset, body)
        except ReplicaError as exc:
            self._drop(link, f"append refused ({exc.kind}): {exc}")
            return
        except HAProtocolError as exc:
            self._drop(link, str(exc))
            return
        except Exception as exc:  # a bug must cost this connection, not the broker
            log.exception("HA: handling the master's bytes failed")
            self._drop(link, f"internal error: {exc!r}")
            return
        self._report(link.transport)

    def _report(self, t: asyncio.Transport, force: bool = False) -> None:
        end = self.appender.max_offset
        if end > self._reported or force:
            t.write(encode_report(end))
            self._reported = end
            self._last_report = time.monotonic()
            self.status.last_write_ms = int(time.time() * 1000)

    def _drop(self, link: _Link, reason: str) -> None:
        self._error(reason)
        if link.transport is not None:
            link.transport.abort()

    def _error(self, reason: str) -> None:
        if reason != self.status.last_error:
            log.warning("HA: %s", reason)
        self.status.last_error = reason
        self.status.state = "retry_wait"
        h = self.status.history
        h.append(f"{time.strftime('%H:%M:%S')} {reason}")
        del h[:-8]

    def info(self) -> dict[str, Any]:
        """RocketMQ's HAClientRuntimeInfo, plus rocketq's state and last error."""
        st = self.status
        return {
            "masterAddr": self.master_ha_addr or "",
            "masterBrokerAddr": self.master_addr or "",
            "transferredByteInSecond": int(self.rate),
            "maxOffset": self.appender.max_offset,
            "lastReadTimestamp": st.last_read_ms,
            "lastWriteTimestamp": st.last_write_ms,
            "masterFlushOffset": 0,
            "isActivated": st.state == "transfer",
            "state": st.state,
            "lastError": st.last_error,
            "connects": st.connects,
            "pendingBytes": self.appender.pending,
            "recentErrors": list(st.history),
        }
