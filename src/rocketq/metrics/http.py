"""The /metrics endpoint: a small HTTP/1.1 server on the process's event loop, parsing with h11.

Every request is untrusted input and its handling is bounded:

* at most ``max_connections`` connections at once; beyond, a new one gets 503 and is closed;
* the whole request (line and headers, at most 8 KiB; a body is not read) must arrive within
  ``request_timeout_s`` of the connection opening, or the connection is closed;
* one request per connection (``Connection: close``), so an idle peer holds nothing;
* scrapes are rendered one at a time (the collection runs on a worker thread, the loop stays free).

Only ``GET`` / ``HEAD`` of ``/metrics`` is served. With an authenticator set, a request without valid
credentials gets 401 (``WWW-Authenticate: Basic``) and nothing about the broker.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import h11

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8 * 1024
_READ_CHUNK = 4096
_SERVER = b"rocketq"


class Authenticator(Protocol):
    def allows(self, authorization: str | None) -> bool:
        """Is this ``Authorization`` header value (None: absent) good for reading the metrics?"""
        ...


# render(accept header) -> (body, content type); runs the collection
Renderer = Callable[[str], Awaitable[tuple[bytes, str]]]


class MetricsHttpServer:
    def __init__(
        self,
        host: str,
        port: int,
        render: Renderer,
        *,
        auth: Authenticator | None = None,
        max_connections: int = 16,
        request_timeout_s: float = 10.0,
        name: str = "metrics",
    ) -> None:
        self.host = host
        self.port = port
        self.render = render
        self.auth = auth
        self.max_connections = max_connections
        self.request_timeout_s = request_timeout_s
        self.name = name
        self.active = 0
        self.refused = 0  # connections turned away (over max_connections)
        self.timed_out = 0  # connections closed before a whole request arrived
        self.unauthorized = 0  # requests answered 401
        self._server: asyncio.AbstractServer | None = None
        self._render_lock = asyncio.Lock()
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port, limit=_READ_CHUNK * 2)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._conns):
                task.cancel()
            await asyncio.gather(*self._conns, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    # -- one connection ----------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.active >= self.max_connections:
            self.refused += 1
            writer.write(_plain(503, b"too many metrics connections\n"))
            await _close(writer)
            return
        self.active += 1
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("%s endpoint: request failed", self.name)
        finally:
            self.active -= 1
            if task is not None:
                self._conns.discard(task)
            await _close(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
        try:
            request = await asyncio.wait_for(_read_request(conn, reader), self.request_timeout_s)
        except TimeoutError:
            self.timed_out += 1
            return
        except h11.RemoteProtocolError as exc:
            writer.write(_plain(exc.error_status_hint or 400, b"bad request\n"))
            return
        if request is None:  # closed before a request
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
        method = request.method.upper()
        path = request.target.split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            status, body, ctype, extra = 405, b"only GET /metrics\n", "text/plain", [(b"Allow", b"GET, HEAD")]
        elif path != b"/metrics":
            status, body, ctype, extra = 404, b"not found: the metrics are at /metrics\n", "text/plain", []
        elif self.auth is not None and not self.auth.allows(headers.get("authorization")):
            self.unauthorized += 1
            status, body, ctype = 401, b"authentication required\n", "text/plain"
            extra = [(b"WWW-Authenticate", b'Basic realm="rocketq metrics", charset="UTF-8"')]
        else:
            try:
                async with self._render_lock:
                    body, ctype = await self.render(headers.get("accept", ""))
                status, extra = 200, []
            except Exception:
                log.exception("%s endpoint: collecting the metrics failed", self.name)
                status, body, ctype, extra = (
                    500,
                    b"collecting the metrics failed (see the log)\n",
                    "text/plain",
                    [],
                )
            if "gzip" in headers.get("accept-encoding", "") and len(body) > 1024:
                body = await asyncio.get_running_loop().run_in_executor(None, gzip.compress, body, 1)
                extra.append((b"Content-Encoding", b"gzip"))
        response = h11.Response(
            status_code=status,
            reason=_REASONS.get(status, b""),
            headers=[
                (b"Content-Type", ctype.encode()),
                (b"Content-Length", str(len(body)).encode()),
                (b"Connection", b"close"),
                (b"Server", _SERVER),
                *extra,
            ],
        )
        writer.write(conn.send(response) or b"")
        if method != b"HEAD":
            writer.write(conn.send(h11.Data(data=body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    received = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(_READ_CHUNK)
            received += len(data)
            if received > MAX_REQUEST_BYTES:  # h11 checks incomplete heads only; this bounds a whole one too
                raise h11.RemoteProtocolError("request head too long", 431)
            conn.receive_data(data)  # b"" = EOF
            continue
        if isinstance(event, h11.Request):
            return event
        if isinstance(event, h11.ConnectionClosed):
            return None
        raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}", 400)


_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    401: b"Unauthorized",
    404: b"Not Found",
    405: b"Method Not Allowed",
    500: b"Internal Server Error",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


def _plain(status: int, text: bytes) -> bytes:
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
        % (status, _REASONS.get(status, b"Error"), len(text), text)
    )


async def _close(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 2.0)
    except (Exception, asyncio.CancelledError):
        pass
