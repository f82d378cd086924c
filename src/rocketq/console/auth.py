"""Who may use the console: accounts (users.properties or plain_acl.yml), sessions, login throttling.

Sessions live in memory (a restart logs everybody out), are bounded in number, expire when idle, and each
carries the CSRF token its state-changing requests must echo.
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import yaml

ROLE_ADMIN = "admin"  # may change things
ROLE_USER = "user"  # users.properties users without ",1": read-only
ROLE_ACL = "acl"  # an ACL account: may try anything, the brokers decide with its own permissions

MAX_SESSIONS = 2000
MAX_FAILURES = 5  # failed logins per client address ...
FAILURE_WINDOW_S = 60.0  # ... within this window before logins from it are refused for a while


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    password: str = field(repr=False)
    role: str
    source: str  # "users" | "acl"


@dataclass(slots=True)
class AclView:
    """What the ACL page shows of plain_acl.yml (never the secret keys)."""

    global_white: list[str]
    accounts: list[dict[str, Any]]


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


def parse_users(text: str) -> dict[str, Account]:
    """rocketmq-dashboard's users.properties: ``name=password[,1]`` per line, ``#`` comments; 1 = admin."""
    out: dict[str, Account] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, sep, rest = line.partition("=")
        if not sep or not name.strip():
            continue
        password, _, flag = rest.strip().rpartition(",") if "," in rest else (rest.strip(), "", "0")
        role = ROLE_ADMIN if flag.strip() == "1" else ROLE_USER
        out[name.strip()] = Account(name.strip(), password, role, "users")
    return out


def parse_acl(text: str) -> tuple[dict[str, Account], AclView]:
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError("plain_acl.yml: not a mapping")
    accounts: dict[str, Account] = {}
    shown: list[dict[str, Any]] = []
    for acc in data.get("accounts") or []:
        if not isinstance(acc, dict) or not acc.get("accessKey"):
            continue
        ak = str(acc["accessKey"])
        admin = str(acc.get("admin", False)).lower() == "true"
        accounts[ak] = Account(ak, str(acc.get("secretKey", "")), ROLE_ADMIN if admin else ROLE_ACL, "acl")
        shown.append(
            {
                "accessKey": ak,
                "admin": admin,
                "whiteRemoteAddress": str(acc.get("whiteRemoteAddress") or ""),
                "defaultTopicPerm": str(acc.get("defaultTopicPerm") or "DENY"),
                "defaultGroupPerm": str(acc.get("defaultGroupPerm") or "DENY"),
                "topicPerms": [str(p) for p in acc.get("topicPerms") or []],
                "groupPerms": [str(p) for p in acc.get("groupPerms") or []],
            }
        )
    white = [str(a) for a in data.get("globalWhiteRemoteAddresses") or []]
    return accounts, AclView(white, shown)


class AccountStore:
    """Accounts from the users file and/or the ACL file, re-read when a file changes (like the dashboard)."""

    def __init__(self, users_file: str | None, acl_file: str | None) -> None:
        self.users_file = users_file
        self.acl_file = acl_file
        self._stamp: tuple[float, float] = (-2.0, -2.0)
        self._accounts: dict[str, Account] = {}
        self.acl_view: AclView | None = None
        self.error: str | None = None
        self.reload()

    def reload(self) -> None:
        stamp = (
            _mtime(self.users_file) if self.users_file else -1.0,
            _mtime(self.acl_file) if self.acl_file else -1.0,
        )
        if stamp == self._stamp:
            return
        accounts: dict[str, Account] = {}
        errors: list[str] = []
        acl_view = None
        if self.acl_file:
            try:
                with open(self.acl_file, encoding="utf-8") as f:
                    acl_accounts, acl_view = parse_acl(f.read())
                accounts.update(acl_accounts)
            except (OSError, ValueError, yaml.YAMLError) as exc:
                errors.append(f"ACL file {self.acl_file}: {exc}")
        if self.users_file:
            try:
                with open(self.users_file, encoding="utf-8") as f:
                    accounts.update(parse_users(f.read()))
            except OSError as exc:
                errors.append(f"users file {self.users_file}: {exc}")
        self._stamp = stamp
        self._accounts = accounts
        self.acl_view = acl_view
        self.error = "; ".join(errors) or None

    def check(self, name: str, password: str) -> Account | None:
        self.reload()
        acc = self._accounts.get(name)
        # compare even for an unknown name, so the answer takes as long either way
        expected = acc.password if acc is not None else secrets.token_hex(16)
        ok = hmac.compare_digest(expected.encode(), password.encode())
        return acc if ok and acc is not None else None


@dataclass(slots=True)
class Session:
    sid: str
    csrf: str
    account: Account | None
    created: float
    last_seen: float

    @property
    def user(self) -> str | None:
        return self.account.name if self.account else None


SESSION_KEY = "rocketq.console.session"  # where the request's Session (or None) is kept


def session_of(request: Any) -> Session | None:
    """The aiohttp request's session, as the session middleware found it."""
    return request.get(SESSION_KEY)


class Sessions:
    def __init__(self, idle_s: float, max_sessions: int = MAX_SESSIONS) -> None:
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def new(self, account: Account | None) -> Session:
        now = time.monotonic()
        s = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), account, now, now)
        self._by_id[s.sid] = s
        while len(self._by_id) > self.max_sessions:
            self._by_id.popitem(last=False)  # the least recently used goes first
        return s

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        s = self._by_id.get(sid)
        if s is None:
            return None
        now = time.monotonic()
        if now - s.last_seen > self.idle_s:
            del self._by_id[sid]
            return None
        s.last_seen = now
        self._by_id.move_to_end(sid)
        return s

    def drop(self, sid: str) -> None:
        self._by_id.pop(sid, None)


class LoginThrottle:
    """Refuses logins from an address after MAX_FAILURES failures within FAILURE_WINDOW_S."""

    def __init__(self, max_addresses: int = 10_000) -> None:
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self.max_addresses = max_addresses

    def retry_after(self, addr: str) -> float:
        dq = self._failures.get(addr)
        if not dq:
            return 0.0
        now = time.monotonic()
        while dq and now - dq[0] > FAILURE_WINDOW_S:
            dq.popleft()
        if len(dq) < MAX_FAILURES:
            return 0.0
        return FAILURE_WINDOW_S - (now - dq[0])

    def failed(self, addr: str) -> None:
        dq = self._failures.setdefault(addr, deque(maxlen=MAX_FAILURES))
        dq.append(time.monotonic())
        self._failures.move_to_end(addr)
        while len(self._failures) > self.max_addresses:
            self._failures.popitem(last=False)

    def succeeded(self, addr: str) -> None:
        self._failures.pop(addr, None)
