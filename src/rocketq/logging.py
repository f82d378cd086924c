"""``rocketq.logging.RocketMQHandler``: log records sent as messages to a topic, like RocketMQ's log4j /
logback appenders (seed: "Logappender样例").

    import logging
    from rocketq.logging import RocketMQHandler

    handler = RocketMQHandler("LogTopic", namesrv="127.0.0.1:9876", tags="app-a")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.getLogger().addHandler(handler)

``emit`` formats the record on the caller's thread and queues its bytes; a background thread with its own
event loop and producer sends them in batches (one SEND_BATCH_MESSAGE of up to ``batch_size`` records
or ``batch_bytes``). The application is never blocked and never sees an exception from the handler:

* the queue is bounded (``max_queued`` records and ``max_queued_bytes`` bytes); when the broker is
  unreachable the sender retries its batch with a growing pause while new records fill the queue, and a
  record that does not fit is dropped and counted (``dropped``);
* a record longer than ``max_record_bytes`` is cut to that length (``truncated``);
* ``flush()`` waits (at most ``flush_timeout``) only while the broker is answering; ``close()`` sends
  what is queued, waiting at most ``close_timeout``, then counts the rest as dropped.

Records emitted by the handler's own thread (the producer's own log lines) are ignored: a handler on the
root logger must not feed on itself. This module is ``rocketq.logging``; inside the package every module
imports the standard library's ``logging`` with an absolute import, so the name does not shadow it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["RocketMQHandler"]

Keys = str | Sequence[str] | Callable[[logging.LogRecord], "str | Sequence[str] | None"] | None

_MAX_BACKOFF_S = 5.0
_WARN_EVERY_S = 60.0


class RocketMQHandler(logging.Handler):
    def __init__(
        self,
        topic: str,
        namesrv: str | Sequence[str] | None = None,
        tags: str | None = None,
        keys: Keys = None,
        *,
        producer_group: str = "rocketq_log_appender",
        level: int = logging.NOTSET,
        batch_size: int = 32,
        batch_bytes: int = 1024 * 1024,
        flush_interval: float = 1.0,
        max_queued: int = 10_000,
        max_queued_bytes: int = 16 * 1024 * 1024,
        max_record_bytes: int = 256 * 1024,
        send_timeout_ms: int = 3000,
        flush_timeout: float = 2.0,
        close_timeout: float = 5.0,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        super().__init__(level)
        if not topic:
            raise ValueError("RocketMQHandler needs a topic")
        if batch_size < 1 or max_queued < 1 or max_record_bytes < 1:
            raise ValueError("batch_size, max_queued and max_record_bytes must be positive")
        self.topic = topic
        self.namesrv = namesrv
        self.tags = tags
        self.keys = keys
        self.producer_group = producer_group
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.flush_interval = flush_interval
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes
        self.max_record_bytes = max_record_bytes
        self.send_timeout_ms = send_timeout_ms
        self.flush_timeout = flush_timeout
        self.close_timeout = close_timeout
        self._credentials = (access_key, secret_key)
        # counters (read them any time; they only grow)
        self.sent = 0  # records the broker stored
        self.dropped = 0  # records lost: queue full, or left when close() gave up
        self.truncated = 0
        self.failed_sends = 0  # batch sends that failed (each retried until close)
        self.errors = 0  # records that could not even be formatted
        self.last_error: str | None = None
        self._queue: deque[tuple[bytes, str | None]] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closing = False
        self._healthy = True  # the last send succeeded (flush() waits only then)
        self._inflight = 0  # records taken by the sender and not yet stored or given back
        self._warned_at = -_WARN_EVERY_S
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=f"rocketq-log-{topic}", daemon=True)
        self._ready = threading.Event()
        self._thread.start()
        self._ready.wait(5.0)

    # -- application threads -----------------------------------------------------------------
    def emit(self, record: logging.LogRecord) -> None:
        try:
            if threading.get_ident() == self._thread.ident:
                return  # the producer's own log lines
            body = self.format(record).encode("utf-8", "replace")
            if len(body) > self.max_record_bytes:
                body = body[: self.max_record_bytes]
                self.truncated += 1
            keys = self._keys_of(record)
            with self._cond:
                if (
                    self._closing
                    or len(self._queue) >= self.max_queued
                    or self._queued_bytes + len(body) > self.max_queued_bytes
                ):
                    self.dropped += 1
                    self._warn_dropping()
                    return
                self._queue.append((body, keys))
                self._queued_bytes += len(body)
                full = len(self._queue) >= self.batch_size
            if full:
                self._poke()
        except Exception as exc:  # never into the application
            self.errors += 1
            self.last_error = repr(exc)

    def flush(self) -> None:
        """Send what is queued now; wait (at most ``flush_timeout``) only while the broker is answering."""
        self._poke()
        if not self._healthy or threading.get_ident() == self._thread.ident:
            return
        deadline = time.monotonic() + self.flush_timeout
        with self._cond:
            while (self._queue or self._inflight) and self._healthy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(min(left, 0.05))

    def close(self) -> None:
        """Send what is queued (waiting at most ``close_timeout``) and stop; the rest counts as dropped."""
        with self._cond:
            already = self._closing
            self._closing = True
        if not already:
            self._poke()
            self._thread.join(self.close_timeout)
            with self._cond:
                self.dropped += len(self._queue)
                self._queue.clear()
                self._queued_bytes = 0
        super().close()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def _keys_of(self, record: logging.LogRecord) -> str | None:
        keys = self.keys
        if callable(keys):
            keys = keys(record)
        if keys is None:
            return None
        return keys if isinstance(keys, str) else " ".join(keys)

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop just closed
                pass

    def _warn_dropping(self) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            # not through logging: this handler may be on the logger being written to
            print(
                f"rocketq.logging: dropping log records for topic {self.topic} "
                f"(queue full; {self.dropped} dropped so far; last error: {self.last_error})",
                file=sys.stderr,
            )

    # -- the sender thread ---------------------------------------------------------------------
    def _run(self) -> None:
        from rocketq.remoting.loop import new_event_loop

        loop = new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main(loop))
        except Exception as exc:
            self.last_error = repr(exc)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                self._loop = None
                loop.close()
                with self._cond:
                    self._cond.notify_all()

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        from rocketq.client.instance import ClientConfig
        from rocketq.client.producer import Producer

        self._wake = asyncio.Event()
        self._loop = loop
        self._ready.set()
        ak, sk = self._credentials
        producer = Producer(
            self.producer_group,
            self.namesrv,
            instance_name=f"rocketq-log-{id(self):x}",
            send_msg_timeout=self.send_timeout_ms,
            retry_times_when_send_failed=0,  # the sender retries the whole batch itself
            client_config=ClientConfig(access_key=ak, secret_key=sk) if ak else None,
        )
        started = False
        backoff = 0.0
        try:
            while True:
                if not started:
                    try:
                        await producer.start()
                        started = True
                    except Exception as exc:
                        self._failed(exc)
                        if await self._pause(backoff := _next_backoff(backoff)):
                            return
                        continue
                batch = self._take()
                if not batch:
                    if self._closing:
                        return
                    await self._idle()
                    continue
                if await self._send(producer, batch):
                    backoff = 0.0
                    continue
                self._give_back(batch)
                if await self._pause(backoff := _next_backoff(backoff)):
                    return
        finally:
            if started:
                try:
                    await asyncio.wait_for(producer.shutdown(), 2.0)
                except Exception:
                    pass

    def _take(self) -> list[tuple[bytes, str | None]]:
        with self._cond:
            batch: list[tuple[bytes, str | None]] = []
            size = 0
            q = self._queue
            limit = self.batch_bytes
            while q and len(batch) < self.batch_size and (not batch or size + len(q[0][0]) <= limit):
                body, keys = q.popleft()
                batch.append((body, keys))
                size += len(body)
            self._queued_bytes -= size
            self._inflight = len(batch)
            return batch

    def _give_back(self, batch: list[tuple[bytes, str | None]]) -> None:
        """A batch that failed goes back to the front, to be tried again (bounds still hold: it came out)."""
        with self._cond:
            self._queue.extendleft(reversed(batch))
            self._queued_bytes += sum(len(b) for b, _ in batch)
            self._inflight = 0
            q = self._queue
            # records admitted while it was out: drop the newest beyond the bounds
            while len(q) > self.max_queued or (self._queued_bytes > self.max_queued_bytes and len(q) > 1):
                body, _ = q.pop()
                self._queued_bytes -= len(body)
                self.dropped += 1

    async def _send(self, producer: Any, batch: list[tuple[bytes, str | None]]) -> bool:
        from rocketq.client.message import Message

        msgs = [Message(self.topic, body, tags=self.tags, keys=keys) for body, keys in batch]
        try:
            await producer.send(msgs if len(msgs) > 1 else msgs[0])
        except Exception as exc:
            self._failed(exc)
            return False
        with self._cond:
            self.sent += len(batch)
            self._inflight = 0
            self._healthy = True
            self._cond.notify_all()
        return True

    def _failed(self, exc: BaseException) -> None:
        self.failed_sends += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        with self._cond:
            self._healthy = False
            self._cond.notify_all()

    async def _idle(self) -> None:
        wake = self._wake
        assert wake is not None
        try:
            await asyncio.wait_for(wake.wait(), self.flush_interval)
        except TimeoutError:
            pass
        wake.clear()

    async def _pause(self, seconds: float) -> bool:
        """Wait before a retry; True when closing (give up: close() counts what is left)."""
        if self._closing:
            return True
        wake = self._wake
        assert wake is not None
        deadline = time.monotonic() + seconds
        while not self._closing:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(wake.wait(), left)
            except TimeoutError:
                return False
            wake.clear()
        return True


def _next_backoff(current: float) -> float:
    return min(max(current * 2, 0.1), _MAX_BACKOFF_S)
