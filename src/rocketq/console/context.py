"""What every console request handler works with: the config, the AdminClient(s), sessions, jobs, history."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from rocketq.admin import AdminClient
from rocketq.client.acl import AclClientRPCHook

from .auth import AccountStore, LoginThrottle, Sessions, session_of
from .collector import Collector
from .config import ConsoleConfig
from .jobs import Job, Jobs

MAX_ACCOUNT_CLIENTS = 64


class ConsoleContext:
    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        hook = None
        if config.acl_enabled and config.access_key and config.secret_key:
            hook = AclClientRPCHook(config.access_key, config.secret_key)
        # the console's own identity: background sampling, and users of the users file
        self.admin = AdminClient(config.namesrv, rpc_hook=hook)
        self._account_admins: dict[str, AdminClient] = {}
        self.accounts = AccountStore(config.users_file, config.acl_file)
        self.sessions = Sessions(config.session_idle_s)
        self.throttle = LoginThrottle()
        self.jobs = Jobs()
        self.collector = Collector(self.admin, config.collect_interval_s, config.history_points)

    def admin_for(self, request: web.Request) -> AdminClient:
        """The AdminClient acting for this request: with ACL on, an ACL account acts as itself (the brokers
        apply its permissions); everyone else acts through the console's identity."""
        s = session_of(request)
        acc = s.account if s else None
        if not (self.config.acl_enabled and acc is not None and acc.source == "acl"):
            return self.admin
        admin = self._account_admins.get(acc.name)
        if admin is None:
            if len(self._account_admins) >= MAX_ACCOUNT_CLIENTS:
                return self.admin
            admin = AdminClient(self.config.namesrv, rpc_hook=AclClientRPCHook(acc.name, acc.password))
            self._account_admins[acc.name] = admin
        return admin

    def broker_job(
        self,
        request: web.Request,
        title: str,
        masters: dict[str, str],
        step: Callable[[str], Awaitable[Any]],
        done: str,
        finish: Callable[[Job], Awaitable[Any]] | None = None,
    ) -> dict[str, str]:
        """A job doing ``step(addr)`` on each broker (one progress line each: ``done`` and the broker), then
        ``finish(job)`` (one more step) when given. Answers the request's JSON: {"job": id}."""

        async def work(job: Job) -> Any:
            for name, addr in sorted(masters.items()):
                await step(addr)
                job.step(f"{done} on {name} ({addr})")
            tail = await finish(job) if finish is not None else None
            return {"brokers": sorted(masters), **(tail or {})}

        total = len(masters) + (1 if finish is not None else 0)
        job = self.jobs.start(title, total, work, self.user_of(request))
        return {"job": job.id}

    def user_of(self, request: web.Request) -> str | None:
        s = session_of(request)
        return s.user if s else None

    async def close(self) -> None:
        await self.collector.close()
        await self.jobs.close()
        for a in [self.admin, *self._account_admins.values()]:
            await a.close()
