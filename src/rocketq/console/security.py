"""The console's request guards, as aiohttp middlewares, outermost first:

1. headers: a strict Content-Security-Policy (scripts and styles only from the console itself, nothing
   inline, no frames) and the other browser hardening headers, on every answer, errors included;
2. host: while bound to loopback only loopback Host headers are served (a DNS-rebinding page cannot reach it);
3. session: the session cookie is looked up; a login is required for every API call but a few public ones;
4. CSRF: a request that changes state must carry the session's token in X-CSRF-Token, send JSON, and come
   from this origin when the browser says where it comes from; read-only users may not change anything;
5. errors: ApiError, AdminError and unexpected failures become JSON errors (never a traceback page).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web

from rocketq.admin import AdminError, NamesrvUnreachableError, TopicNotFoundError
from rocketq.protocol.codes import ResponseCode

from .auth import ROLE_USER, SESSION_KEY, session_of
from .config import is_loopback
from .routes import ApiError, endpoint_of, json_response

if TYPE_CHECKING:
    from .context import ConsoleContext

log = logging.getLogger("rocketq.console")

SESSION_COOKIE = "rocketq_console"
CSRF_HEADER = "X-CSRF-Token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_middlewares(ctx: ConsoleContext) -> list[Callable[..., Awaitable[web.StreamResponse]]]:
    @web.middleware
    async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            resp = await handler(request)
        except web.HTTPException as exc:
            resp = exc
        for k, v in SECURITY_HEADERS.items():
            resp.headers.setdefault(k, v)
        if request.path.startswith("/api/"):
            resp.headers.setdefault("Cache-Control", "no-store")
        if isinstance(resp, web.HTTPException) and resp.status >= 400:
            if request.path.startswith("/api/") and resp.content_type != "application/json":
                err = json_response({"error": resp.reason}, resp.status)
                for k, v in resp.headers.items():
                    if k.lower() not in ("content-type", "content-length"):
                        err.headers.setdefault(k, v)
                return err
            raise resp
        return resp

    @web.middleware
    async def host_check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_loopback(ctx.config.host):
            host = (request.host or "").rpartition(":")[0] if ":" in (request.host or "") else request.host
            host = (host or "").strip("[]")
            if host != "localhost" and not is_loopback(host):
                raise web.HTTPMisdirectedRequest(text="this console answers loopback addresses only")
        return await handler(request)

    @web.middleware
    async def session(request: web.Request, handler: Handler) -> web.StreamResponse:
        s = ctx.sessions.get(request.cookies.get(SESSION_COOKIE))
        request[SESSION_KEY] = s
        ep = endpoint_of(request)
        needs = ep is not None and not ep.public and ctx.config.needs_login()
        if needs and (s is None or s.account is None):
            return json_response({"error": "login required", "login": True}, 401)
        return await handler(request)

    @web.middleware
    async def csrf(request: web.Request, handler: Handler) -> web.StreamResponse:
        ep = endpoint_of(request)
        if request.method not in ("GET", "HEAD", "OPTIONS") or (ep is not None and ep.changes_state):
            s = session_of(request)
            token = request.headers.get(CSRF_HEADER, "")
            if s is None or not token or not hmac.compare_digest(token, s.csrf):
                return json_response({"error": "missing or wrong CSRF token (reload the page)"}, 403)
            origin = request.headers.get("Origin")
            if origin and origin != "null" and urlsplit(origin).netloc != request.host:
                return json_response({"error": f"cross-origin request from {origin} refused"}, 403)
            if request.method in ("POST", "PUT", "PATCH") and request.content_type != "application/json":
                return json_response({"error": "requests that change state send application/json"}, 415)
            if ep is not None and ep.admin and not ep.public:
                if ctx.config.read_only:
                    return json_response({"error": "this console is read-only"}, 403)
                if s.account is not None and s.account.role == ROLE_USER:
                    return json_response({"error": f"user {s.account.name} is read-only"}, 403)
        return await handler(request)

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return json_response({"error": exc.message}, exc.status)
        except TopicNotFoundError as exc:
            return json_response({"error": str(exc)}, 404)
        except NamesrvUnreachableError as exc:
            return json_response({"error": str(exc)}, 502)
        except AdminError as exc:
            status = 403 if exc.code == ResponseCode.NO_PERMISSION or "[ACL]" in str(exc) else 502
            return json_response({"error": str(exc)}, status)
        except web.HTTPException:
            raise
        except Exception:
            log.exception("console request %s %s failed", request.method, request.path)
            return json_response({"error": "internal error (see the console's log)"}, 500)

    return [headers, host_check, session, csrf, errors]
