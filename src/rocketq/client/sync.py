"""Synchronous facade: the asyncio core runs on one background event-loop thread shared by the process;
each blocking call submits a coroutine to it and waits."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from rocketq.remoting.loop import new_event_loop

from . import consumer as _consumer
from . import lite_pull as _lite
from . import producer as _producer
from . import transaction as _transaction
from .message import Message, MessageExt, MessageQueue, SendResult, invoke_send_callback

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide client event loop (started on first use, a daemon thread)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or _thread is None or not _thread.is_alive():
            loop = new_event_loop()
            started = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            t = threading.Thread(target=run, name="rocketq-client-loop", daemon=True)
            t.start()
            started.wait()
            _loop, _thread = loop, t
        return _loop


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    loop = background_loop()
    if _thread is threading.current_thread():
        coro.close()
        raise RuntimeError("blocking rocketq call made on the client event loop; use rocketq.aio there")
    fut = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        fut.cancel()
        raise


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    return asyncio.run_coroutine_threadsafe(coro, background_loop())


_live: set[Any] = set()


@atexit.register
def _shutdown_all() -> None:
    for client in list(_live):
        try:
            client.shutdown()
        except Exception:
            pass


class _Facade:
    _core: Any

    def __getattr__(self, name: str) -> Any:
        # configuration attributes of the core (group, send_msg_timeout, ...)
        if name == "_core":
            raise AttributeError(name)
        return getattr(self._core, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # producer.send_msg_timeout = 5000 etc. configure the core
        if name != "_core" and "_core" in self.__dict__ and hasattr(self._core, name):
            setattr(self._core, name, value)
        else:
            object.__setattr__(self, name, value)

    def start(self) -> None:
        run(self._core.start())
        _live.add(self)

    def shutdown(self) -> None:
        _live.discard(self)
        run(self._core.shutdown())

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class Producer(_Facade):
    """``with Producer("PG", namesrv="127.0.0.1:9876") as p: p.send(Message("T", b"hi"))``."""

    def __init__(
        self, group: str = "DEFAULT_PRODUCER", namesrv: str | Sequence[str] | None = None, **kwargs: Any
    ):
        self._core = _producer.Producer(group, namesrv, **kwargs)

    def send(
        self,
        msg: Message | Sequence[Message],
        queue: MessageQueue | None = None,
        selector: _producer.Selector | None = None,
        arg: Any = None,
        timeout: int | None = None,
    ) -> SendResult:
        return run(self._core.send(msg, queue=queue, selector=selector, arg=arg, timeout=timeout))

    def send_async(
        self,
        msg: Message | Sequence[Message],
        queue: MessageQueue | None = None,
        selector: _producer.Selector | None = None,
        arg: Any = None,
        timeout: int | None = None,
        callback: Any = None,
    ) -> concurrent.futures.Future[SendResult]:
        """A concurrent.futures.Future[SendResult]. ``callback`` (``fn(result, exc)`` or an object with
        on_success / on_exception) runs on completion."""

        async def go() -> SendResult:
            return await self._core.send_async(msg, queue=queue, selector=selector, arg=arg, timeout=timeout)

        fut = submit(go())
        if callback is not None:

            def done(f: concurrent.futures.Future[SendResult]) -> None:
                if f.cancelled():
                    invoke_send_callback(callback, None, concurrent.futures.CancelledError())
                elif f.exception() is not None:
                    invoke_send_callback(callback, None, f.exception())
                else:
                    invoke_send_callback(callback, f.result(), None)

            fut.add_done_callback(done)
        return fut

    def send_oneway(
        self,
        msg: Message,
        queue: MessageQueue | None = None,
        selector: _producer.Selector | None = None,
        arg: Any = None,
    ) -> None:
        run(self._core.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def request(
        self,
        msg: Message,
        timeout: int | None = None,
        queue: MessageQueue | None = None,
        selector: _producer.Selector | None = None,
        arg: Any = None,
    ) -> MessageExt:
        """Request–reply: send and block until the responder's reply arrives (or MQClientError)."""
        return run(self._core.request(msg, timeout=timeout, queue=queue, selector=selector, arg=arg))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return run(self._core.fetch_publish_message_queues(topic))


class TransactionProducer(Producer):
    """``TransactionProducer("PG", namesrv=..., listener=obj)``; ``obj.execute_local_transaction(msg, arg)``
    and ``obj.check_local_transaction(msg)`` run in worker threads and return LocalTransactionState."""

    def __init__(self, group: str, namesrv: str | Sequence[str] | None = None, **kwargs: Any):
        self._core = _transaction.TransactionProducer(group, namesrv, **kwargs)

    def send_message_in_transaction(
        self, msg: Message, arg: Any = None
    ) -> _transaction.TransactionSendResult:
        return run(self._core.send_message_in_transaction(msg, arg))


class PushConsumer(_Facade):
    """Listeners are plain functions ``fn(msgs) -> ConsumeResult``, run in ``consume_thread_max`` threads."""

    def __init__(self, group: str, namesrv: str | Sequence[str] | None = None, **kwargs: Any):
        self._core = _consumer.PushConsumer(group, namesrv, **kwargs)

    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        loop = background_loop()
        if self._core._running:
            asyncio.run_coroutine_threadsafe(_call(self._core.subscribe, topic, expression), loop).result()
        else:
            self._core.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._core.unsubscribe(topic)

    def register_listener(self, listener: Any, orderly: bool = False) -> None:
        self._core.register_listener(listener, orderly=orderly)

    register_message_listener = register_listener

    def register_listener_orderly(self, listener: Any) -> None:
        self._core.register_listener(listener, orderly=True)

    def suspend(self) -> None:
        self._core.suspend()

    def resume(self) -> None:
        self._core.resume()

    def assigned_queues(self) -> list[MessageQueue]:
        return run(_call(self._core.assigned_queues))

    @property
    def client_id(self) -> str:
        return self._core.client_id


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


class LitePullConsumer(_Facade):
    def __init__(self, group: str, namesrv: str | Sequence[str] | None = None, **kwargs: Any):
        self._core = _lite.LitePullConsumer(group, namesrv, **kwargs)

    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        if self._core._running:
            run(_call(self._core.subscribe, topic, expression))
        else:
            self._core.subscribe(topic, expression)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        run(self._core.assign(list(mqs)))

    def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        return run(self._core.poll(timeout_ms))

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        run(self._core.commit(offsets))

    commit_sync = commit

    def committed(self, mq: MessageQueue) -> int:
        return run(self._core.committed(mq))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        run(self._core.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        run(self._core.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        run(self._core.seek_to_end(mq))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return run(self._core.fetch_message_queues(topic))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        run(_call(self._core.pause, list(mqs)))

    def resume(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        run(_call(self._core.resume, None if mqs is None else list(mqs)))

    def assignment(self) -> list[MessageQueue]:
        return run(_call(self._core.assignment))
