"""The console's JSON API as data: each endpoint is declared once (method, path, summary, parameters, body),
which registers it with aiohttp, drives input checks, and produces the OpenAPI document (/api/openapi.json).

Handlers take the request and the checked parameters, and return plain data (serialised with orjson) or an
aiohttp response; they raise :class:`ApiError` for a client mistake.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # RocketMQ's topic and group name rule
MAX_NAME = 255
MAX_TEXT = 4096


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: str = "string"  # string | integer | boolean | name (a topic or group) | array
    required: bool = False
    description: str = ""
    where: str = "query"  # query | path | body
    max_len: int = MAX_TEXT

    def convert(self, raw: Any) -> Any:
        if self.kind == "array":
            if not isinstance(raw, list) or len(raw) > 1000:
                raise ApiError(400, f"{self.name}: a list of at most 1000 items is expected")
            return [str(x)[: self.max_len] for x in raw]
        if self.kind == "integer":
            try:
                return int(raw)
            except (TypeError, ValueError):
                raise ApiError(400, f"{self.name}: an integer is expected") from None
        if self.kind == "boolean":
            if isinstance(raw, bool):
                return raw
            return str(raw).lower() in ("1", "true", "yes", "on")
        text = str(raw)
        if len(text) > (MAX_NAME if self.kind == "name" else self.max_len):
            raise ApiError(400, f"{self.name}: too long")
        if self.kind == "name" and not NAME_RE.match(text):
            raise ApiError(400, f"{self.name}: {text!r} is not a valid name (allowed: ^[%|a-zA-Z0-9_-]+$)")
        return text


Handler = Callable[..., Awaitable[Any]]


@dataclass(slots=True)
class Endpoint:
    method: str
    path: str
    summary: str
    tag: str
    params: tuple[Param, ...]
    handler: Handler
    public: bool = False  # reachable without a login
    admin: bool = False  # changes state: CSRF-checked, refused to read-only users
    download: str | None = None  # media type of a download (else JSON)
    description: str = ""

    @property
    def changes_state(self) -> bool:
        return self.method != "GET"


@dataclass(slots=True)
class Api:
    endpoints: list[Endpoint] = field(default_factory=list)

    def route(
        self,
        method: str,
        path: str,
        summary: str,
        tag: str,
        *params: Param,
        public: bool = False,
        download: str | None = None,
        description: str = "",
    ) -> Callable[[Handler], Handler]:
        def wrap(fn: Handler) -> Handler:
            self.endpoints.append(
                Endpoint(
                    method, path, summary, tag, params, fn, public, method != "GET", download, description
                )
            )
            return fn

        return wrap

    def install(self, app: web.Application, ctx_key: web.AppKey[Any]) -> None:
        for ep in self.endpoints:
            app.router.add_route(ep.method, ep.path, _bind(ep, ctx_key))

    def openapi(self, title: str, version: str) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        for ep in self.endpoints:
            op: dict[str, Any] = {
                "summary": ep.summary,
                "tags": [ep.tag],
                "operationId": ep.handler.__name__,
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {ep.download or "application/json": {}},
                    },
                    "4XX": {"description": "bad request, not logged in, forbidden, not found"},
                    "502": {"description": "a broker or NameServer refused or did not answer"},
                },
            }
            if ep.description:
                op["description"] = ep.description
            non_body = [p for p in ep.params if p.where != "body"]
            if non_body:
                op["parameters"] = [
                    {
                        "name": p.name,
                        "in": p.where,
                        "required": p.required or p.where == "path",
                        "description": p.description,
                        "schema": _schema(p),
                    }
                    for p in non_body
                ]
            body = [p for p in ep.params if p.where == "body"]
            if body:
                op["requestBody"] = {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    p.name: {**_schema(p), "description": p.description} for p in body
                                },
                                "required": [p.name for p in body if p.required],
                            }
                        }
                    },
                }
            if ep.changes_state:
                op["parameters"] = [
                    *op.get("parameters", []),
                    {
                        "name": "X-CSRF-Token",
                        "in": "header",
                        "required": True,
                        "description": "the csrf value of GET /api/session",
                        "schema": {"type": "string"},
                    },
                ]
            paths.setdefault(ep.path, {})[ep.method.lower()] = op
        return {
            "openapi": "3.1.0",
            "info": {
                "title": title,
                "version": version,
                "description": "The JSON API behind the rocketq web console. A session cookie comes from "
                "GET /api/session (and POST /api/login when a login is required); every request that "
                "changes state sends the session's csrf value in the X-CSRF-Token header.",
            },
            "paths": paths,
        }


def _schema(p: Param) -> dict[str, Any]:
    if p.kind == "integer":
        return {"type": "integer"}
    if p.kind == "boolean":
        return {"type": "boolean"}
    if p.kind == "array":
        return {"type": "array", "items": {"type": "string"}}
    if p.kind == "name":
        return {"type": "string", "pattern": NAME_RE.pattern, "maxLength": MAX_NAME}
    return {"type": "string", "maxLength": p.max_len}


def endpoint_of(request: web.Request) -> Endpoint | None:
    return getattr(request.match_info.handler, "endpoint", None)


def _bind(ep: Endpoint, ctx_key: web.AppKey[Any]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        body: dict[str, Any] = {}
        if any(p.where == "body" for p in ep.params):
            raw = await request.read()
            try:
                parsed = orjson.loads(raw) if raw else {}
            except orjson.JSONDecodeError:
                raise ApiError(400, "the request body is not JSON") from None
            if not isinstance(parsed, dict):
                raise ApiError(400, "the request body must be a JSON object")
            body = parsed
        args: dict[str, Any] = {}
        for p in ep.params:
            source: Any = (
                request.match_info if p.where == "path" else body if p.where == "body" else request.query
            )
            raw_value = source.get(p.name)
            if raw_value is None or raw_value == "":
                if p.required or p.where == "path":
                    raise ApiError(400, f"{p.name} is required")
                continue
            args[p.name] = p.convert(raw_value)
        result = await ep.handler(request.app[ctx_key], request, **args)
        if isinstance(result, web.StreamResponse):
            return result
        return json_response(result)

    handle.endpoint = ep  # type: ignore[attr-defined]
    handle.__name__ = ep.handler.__name__
    return handle


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS),
        status=status,
        content_type="application/json",
    )


API = Api()  # the console's endpoints; the api_*.py modules register theirs on import
