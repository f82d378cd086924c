"""Session, login, dashboard, cluster, jobs, ACL and the API description."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from rocketq import __version__
from rocketq.admin import AdminClient, AdminError

from .auth import session_of
from .collector import first_float
from .context import ConsoleContext
from .routes import API, ApiError, Param, json_response
from .security import SESSION_COOKIE


def _set_cookie(ctx: ConsoleContext, resp: web.StreamResponse, sid: str) -> None:
    resp.set_cookie(
        SESSION_COOKIE,
        sid,
        httponly=True,
        samesite="Strict",
        path="/",
        max_age=int(ctx.config.session_idle_s) * 12,
    )


@API.route(
    "GET",
    "/api/session",
    "Who is logged in, whether a login is needed, the CSRF token",
    "session",
    public=True,
)
async def get_session(ctx: ConsoleContext, request: web.Request) -> web.StreamResponse:
    s = session_of(request)
    fresh = s is None
    if s is None:
        s = ctx.sessions.new(None)
    acc = s.account
    resp = json_response(
        {
            "user": acc.name if acc else None,
            "role": acc.role if acc else ("anonymous" if ctx.config.needs_login() else "admin"),
            "loginRequired": ctx.config.needs_login(),
            "readOnly": ctx.config.read_only or (acc is not None and acc.role == "user"),
            "csrf": s.csrf,
            "namesrv": ctx.config.namesrv,
            "label": ctx.config.cluster_label,
            "aclEnabled": ctx.config.acl_enabled,
            "version": __version__,
        }
    )
    if fresh:
        _set_cookie(ctx, resp, s.sid)
    return resp


@API.route(
    "POST",
    "/api/login",
    "Log in (users file or ACL account); answers with a new session",
    "session",
    Param("username", required=True, where="body", max_len=256),
    Param("password", required=True, where="body", max_len=1024),
    public=True,
)
async def login(
    ctx: ConsoleContext, request: web.Request, username: str, password: str
) -> web.StreamResponse:
    peer = f"{request.remote or '?'}|{username}"  # per address and account: one user's guesses lock only it
    wait = ctx.throttle.retry_after(peer)
    if wait > 0:
        return json_response(
            {"error": f"too many failed logins: try again in {int(wait) + 1} s"}, 429
        )  # the header tells clients too
    acc = ctx.accounts.check(username, password)
    if acc is None:
        ctx.throttle.failed(peer)
        await asyncio.sleep(0.2)
        return json_response({"error": "wrong user name or password"}, 401)
    ctx.throttle.succeeded(peer)
    old = session_of(request)
    if old is not None:
        ctx.sessions.drop(old.sid)  # a new session id at login: a planted cookie is worth nothing
    s = ctx.sessions.new(acc)
    resp = json_response({"user": acc.name, "role": acc.role, "csrf": s.csrf})
    _set_cookie(ctx, resp, s.sid)
    return resp


@API.route("POST", "/api/logout", "Log out", "session", public=True)
async def logout(ctx: ConsoleContext, request: web.Request) -> web.StreamResponse:
    s = session_of(request)
    if s is not None:
        ctx.sessions.drop(s.sid)
    resp = json_response({"ok": True})
    resp.del_cookie(SESSION_COOKIE, path="/")
    return resp


@API.route("GET", "/api/openapi.json", "This API, as an OpenAPI 3.1 document", "session", public=True)
async def openapi(ctx: ConsoleContext, request: web.Request) -> Any:
    return API.openapi("rocketq console API", __version__)


@API.route("GET", "/api/dashboard", "Broker and topic TPS history (charts) and the top topics", "dashboard")
async def dashboard(ctx: ConsoleContext, request: web.Request) -> Any:
    return ctx.collector.snapshot()


async def _broker_rows(admin: AdminClient) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    info = await admin.cluster_info()
    cluster_of = {b: c for c, names in info["clusterAddrTable"].items() for b in names}
    targets = [
        (cluster_of.get(name, ""), name, str(bid), addr)
        for name, data in sorted(info["brokerAddrTable"].items())
        for bid, addr in sorted(((data or {}).get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0]))
    ]

    async def one(cluster: str, name: str, bid: str, addr: str) -> dict[str, Any]:
        try:
            rt = await admin.broker_runtime_info(addr)
            err = None
        except AdminError as exc:
            rt, err = {}, str(exc)
        return {
            "cluster": cluster,
            "brokerName": name,
            "brokerId": int(bid),
            "role": "MASTER" if bid == "0" else "SLAVE",
            "addr": addr,
            "version": rt.get("brokerVersionDesc", ""),
            "inTps": first_float(rt.get("putTps", "")),
            "outTps": first_float(rt.get("getTransferedTps", rt.get("getTransferredTps", ""))),
            "inToday": int(rt.get("msgPutTotalTodayNow", 0) or 0),
            "outToday": int(rt.get("msgGetTotalTodayNow", 0) or 0),
            "inYesterday": int(rt.get("msgPutTotalYesterdayMorning", 0) or 0),
            "outYesterday": int(rt.get("msgGetTotalYesterdayMorning", 0) or 0),
            "diskRatio": rt.get("commitLogDiskRatio", ""),
            "bootTimestamp": int(rt.get("bootTimestamp", 0) or 0),
            "earliestMessage": int(rt.get("earliestMessageTimeStamp", 0) or 0),
            "runtime": dict(sorted(rt.items())),
            "error": err,
        }

    return info, list(await asyncio.gather(*(one(*t) for t in targets)))


@API.route(
    "GET", "/api/cluster", "Clusters and brokers: role, address, version, TPS, totals, disk", "cluster"
)
async def cluster(ctx: ConsoleContext, request: web.Request) -> Any:
    info, rows = await _broker_rows(ctx.admin_for(request))
    return {"clusters": sorted(info["clusterAddrTable"]), "brokers": rows}


async def known_broker(admin: AdminClient, addr: str) -> str:
    """The broker name of an address the NameServer lists; refuses any other address (the console talks
    only to the cluster's own brokers, never to an address a request makes up)."""
    info = await admin.cluster_info()
    for name, data in info["brokerAddrTable"].items():
        if addr in ((data or {}).get("brokerAddrs") or {}).values():
            return str(name)
    raise ApiError(404, f"no broker of the cluster listens at {addr}")


@API.route(
    "GET",
    "/api/cluster/broker-config",
    "A broker's configuration",
    "cluster",
    Param("addr", required=True, description="broker address, as the cluster lists it", max_len=256),
)
async def broker_config(ctx: ConsoleContext, request: web.Request, addr: str) -> Any:
    admin = ctx.admin_for(request)
    name = await known_broker(admin, addr)
    cfg = await admin.broker_config(addr)
    return {"brokerName": name, "addr": addr, "config": dict(sorted(cfg.items()))}


@API.route(
    "GET", "/api/jobs/{id}", "Progress of a long operation", "jobs", Param("id", where="path", max_len=64)
)
async def job(ctx: ConsoleContext, request: web.Request, id: str) -> Any:
    j = ctx.jobs.get(id)
    if j is None:
        raise ApiError(404, f"no job {id}")
    return j.to_json()


@API.route("GET", "/api/acl", "ACL accounts and their permissions (secret keys never shown)", "acl")
async def acl(ctx: ConsoleContext, request: web.Request) -> Any:
    ctx.accounts.reload()
    view = ctx.accounts.acl_view
    return {
        "aclEnabled": ctx.config.acl_enabled,
        "file": bool(ctx.config.acl_file),
        "error": ctx.accounts.error if ctx.config.acl_file else None,
        "globalWhiteRemoteAddresses": view.global_white if view else [],
        "accounts": view.accounts if view else [],
        "editable": False,
    }
