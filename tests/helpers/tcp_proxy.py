"""A userspace TCP proxy on 127.0.0.1 for network-partition tests (no root, no iptables needed).

proxy = TcpProxy(target_port); proxy.start()       # listens on proxy.port, forwards to target
proxy.blackhole()   # connections stay open but nothing gets through either way (a silent partition)
proxy.forward()     # heal: bytes flow again (on connections made from now on; held ones are dropped)
proxy.close()
"""

from __future__ import annotations

import asyncio
import threading


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.mode = "forward"
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="TcpProxy")
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(cw)
        try:
            ur, uw = await asyncio.open_connection(*self.target)
        except OSError:
            cw.close()
            return
        self._writers.add(uw)

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    if self.mode == "forward":
                        w.write(data)
                        await w.drain()
                    # blackhole: read and drop, so neither side sees an error, only silence
            except (ConnectionError, asyncio.CancelledError):
                pass
            if self.mode == "forward":
                w.close()
            # blackhole: a close is lost like any other packet; forward() resets what is left

        await asyncio.gather(pump(cr, uw), pump(ur, cw))

    def _call(self, fn) -> None:
        async def run() -> None:
            fn()

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def blackhole(self) -> None:
        self._call(lambda: setattr(self, "mode", "blackhole"))

    def forward(self) -> None:
        def heal() -> None:
            self.mode = "forward"
            for w in list(self._writers):  # connections that lived through the partition are reset
                w.close()
            self._writers.clear()

        self._call(heal)

    def close(self) -> None:
        def stop() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.close()

        try:
            self._call(stop)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
