"""ConsoleServer: the aiohttp application (JSON API + the static pages) on the caller's event loop.

``rocketq console`` runs it in a process of its own; ``rocketq standalone`` runs it beside the NameServer and
the broker on their loop (aiohttp's AppRunner takes no signals and no loop of its own, hence aiohttp).
Static files are read once at start into a table keyed by their URL: a request path is only ever a key into
it, never a file system path.
"""

from __future__ import annotations

import logging
import mimetypes
from importlib import resources
from typing import Any

from aiohttp import web

from . import api_cluster, api_consumers, api_messages, api_topics  # noqa: F401 - they register routes
from .config import MAX_REQUEST_BYTES, ConsoleConfig
from .context import ConsoleContext
from .routes import API
from .security import build_middlewares

log = logging.getLogger("rocketq.console")

CTX: web.AppKey[ConsoleContext] = web.AppKey("rocketq.console", ConsoleContext)
INDEX = "index.html"
_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".html": "text/html",
    ".txt": "text/plain",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
}


def load_static() -> dict[str, tuple[bytes, str]]:
    """URL path ("/static/js/app.js") -> (content, media type), for every file shipped under static/."""
    table: dict[str, tuple[bytes, str]] = {}
    root = resources.files("rocketq.console") / "static"

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            if child.name.startswith((".", "__")):
                continue
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
                continue
            ext = "." + child.name.rsplit(".", 1)[-1] if "." in child.name else ""
            ctype = _TYPES.get(ext) or mimetypes.guess_type(child.name)[0] or "application/octet-stream"
            table[f"/static/{prefix}{child.name}"] = (child.read_bytes(), ctype)

    walk(root, "")
    return table


def build_app(ctx: ConsoleContext) -> web.Application:
    app = web.Application(client_max_size=MAX_REQUEST_BYTES, middlewares=build_middlewares(ctx))
    app[CTX] = ctx
    API.install(app, CTX)
    files = load_static()
    index_body, _ = files[f"/static/{INDEX}"]

    async def static(request: web.Request) -> web.StreamResponse:
        hit = files.get(request.path)
        if hit is None:
            raise web.HTTPNotFound()
        body, ctype = hit
        charset = "utf-8" if ctype.startswith("text/") or ctype.endswith("json") else None
        return web.Response(
            body=body, content_type=ctype, charset=charset, headers={"Cache-Control": "no-cache"}
        )

    async def index(request: web.Request) -> web.StreamResponse:
        return web.Response(body=index_body, content_type="text/html", charset="utf-8")

    async def api_not_found(request: web.Request) -> web.StreamResponse:
        raise web.HTTPNotFound()

    app.router.add_get("/", index)
    app.router.add_get("/static/{path:.+}", static)
    app.router.add_route("*", "/api/{path:.*}", api_not_found)
    return app


class ConsoleServer:
    def __init__(self, config: ConsoleConfig) -> None:
        config.check()
        self.config = config
        self.ctx = ConsoleContext(config)
        self._runner: web.AppRunner | None = None
        self.port = config.port

    @property
    def url(self) -> str:
        host = self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    async def start(self) -> None:
        app = build_app(self.ctx)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port, backlog=128)
        try:
            await site.start()
        except BaseException:
            await self.close()
            raise
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self.ctx.collector.start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.ctx.close()
