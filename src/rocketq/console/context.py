"""What every console request handler works with: the config, the AdminClient(s), sessions, jobs, history."""

from __future__ import annotations

from aiohttp import web

from rocketq.admin import AdminClient
from rocketq.client.acl import AclClientRPCHook

from .auth import AccountStore, LoginThrottle, Sessions, session_of
from .collector import Collector
from .config import ConsoleConfig
from .jobs import Jobs

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

    def user_of(self, request: web.Request) -> str | None:
        s = session_of(request)
        return s.user if s else None

    async def close(self) -> None:
        await self.collector.close()
        await self.jobs.close()
        for a in [self.admin, *self._account_admins.values()]:
            await a.close()
