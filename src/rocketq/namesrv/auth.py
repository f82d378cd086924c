"""Who may change the NameServer's routes and config, and a record of who did.

With ``authenticationEnabled=true`` (namesrv.conf, RocketMQ 5's key) every request that is not a plain read
must be signed (RocketMQ's AccessKey/Signature, remoting/acl_signature.py) with one of the configured shared
credentials: ``innerClientAuthenticationCredentials`` (what brokers sign their registrations with) or
``initAuthenticationUser`` (an operator's, for mqadmin). Request codes listed in ``authenticationWhitelist``
(comma-separated numbers) are let through unsigned. Reads (routes, cluster info, KV reads) stay open: every
RocketMQ client asks for routes without signing. An accepted state-changing request is refused if it comes
again within the replay window (``authReplayWindowSeconds``).

Auth on or off, every accepted change (unregistration, write-permission changes, topic deletion, KV writes,
config updates, and a broker's first registration from an address) is logged at INFO by the
``rocketq.namesrv.audit`` logger: remote address, request, its subject, who signed it. At most ``burst``
lines per interval; the rest are counted into one summary line.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RPCHook
from rocketq.remoting.acl_signature import (
    ACCESS_KEY,
    NAMESRV_STATE_CHANGING,
    SIGNED_AT,
    Credentials,
    ReplayGuard,
    verify,
)

audit_log = logging.getLogger("rocketq.namesrv.audit")

C = RequestCode
# Plain reads: open to anyone, as in RocketMQ (clients fetch routes unsigned)
READ_ONLY_CODES = frozenset(
    {
        C.GET_ROUTEINFO_BY_TOPIC,
        C.GET_BROKER_CLUSTER_INFO,
        C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        C.GET_TOPICS_BY_CLUSTER,
        C.GET_KV_CONFIG,
        C.GET_KVLIST_BY_NAMESPACE,
        C.GET_UNIT_TOPIC_LIST,
        C.GET_HAS_UNIT_SUB_TOPIC_LIST,
        C.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    }
)
# Sent again unchanged every 30 s by every broker: only a stamped one (rocketq brokers) is replay-checked
PERIODIC_CODES = frozenset({C.REGISTER_BROKER, C.QUERY_DATA_VERSION})
# Fields (or a body) an Apache client never sends with this code, but a request of another code with the same
# signature carries: the signature does not cover the code, so a captured REGISTER_BROKER or
# QUERY_DATA_VERSION would otherwise pass as UNREGISTER_BROKER, a signed route read as DELETE_TOPIC_IN_NAMESRV
_FOREIGN_FIELDS = {
    C.UNREGISTER_BROKER: frozenset({"haServerAddr", "compressed", "bodyCrc32", "enableActingMaster"}),
    C.DELETE_TOPIC_IN_NAMESRV: frozenset({"acceptStandardJsonOnly"}),
}
_NO_BODY = frozenset({C.UNREGISTER_BROKER, C.WIPE_WRITE_PERM_OF_BROKER, C.ADD_WRITE_PERM_OF_BROKER,
                      C.DELETE_TOPIC_IN_NAMESRV, C.PUT_KV_CONFIG, C.DELETE_KV_CONFIG})  # fmt: skip
# Header fields that say what a change is about
_SUBJECT_FIELDS = ("brokerName", "brokerAddr", "clusterName", "brokerId", "topic", "namespace", "key")
_FIRST_SEEN_MAX = 10_000


class AuthenticationError(PermissionError):
    """A refused request: answered with an error response naming the reason."""


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


class AuditLog:
    """INFO lines for state changes, at most ``burst`` per ``interval_s``; the excess is summarized."""

    def __init__(self, interval_s: float = 60.0, burst: int = 30, logger: logging.Logger = audit_log) -> None:
        self.interval_s = interval_s
        self.burst = burst
        self.log = logger
        self._window_start = -1e18
        self._lines = 0
        self._suppressed: Counter[str] = Counter()

    def record(self, text: str, kind: str) -> None:
        now = time.monotonic()
        if now - self._window_start >= self.interval_s:
            self.flush()
            self._window_start = now
            self._lines = 0
        if self._lines < self.burst:
            self._lines += 1
            self.log.info("%s", text)
        else:
            self._suppressed[kind] += 1

    def flush(self) -> None:
        if self._suppressed:
            parts = ", ".join(f"{k} ×{n}" for k, n in self._suppressed.most_common())
            self.log.info("... and %d more not logged in the last %gs: %s", sum(self._suppressed.values()),
                          self.interval_s, parts)  # fmt: skip
            self._suppressed.clear()


class NamesrvAuthHook(RPCHook):
    """Authentication (when enabled), replay refusal and the audit log of a NameServer."""

    def __init__(
        self,
        enabled: bool,
        credentials: list[Credentials],
        *,
        whitelist: frozenset[int] = frozenset(),
        replay_window_s: float = 120.0,
        audit: AuditLog | None = None,
    ) -> None:
        if enabled and not credentials:
            raise ValueError(
                "authenticationEnabled=true needs innerClientAuthenticationCredentials "
                "or initAuthenticationUser"
            )
        self.enabled = enabled
        self.secrets = {c.access_key: c.secret_key for c in credentials}
        self.whitelist = whitelist
        self.replay = ReplayGuard(replay_window_s) if replay_window_s > 0 else None
        self.audit = audit or AuditLog()
        self.refused: Counter[str] = Counter()
        self._first_seen: set[tuple[str, str]] = set()  # (peer ip, brokerAddr) registrations logged

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        code = request.code
        if not self.enabled:
            return
        ext = request.ext_fields
        if code in READ_ONLY_CODES or code in self.whitelist:
            self._remember_read(code, ext, request)
            return
        try:
            self._authenticate(code, ext, request)
        except AuthenticationError as exc:
            self.refused[str(exc).split(":")[0]] += 1
            self.audit.record(
                f"refused {_code_name(code)} from {remote_addr}{_subject(ext)}: {exc}", "refused"
            )
            raise

    def _authenticate(self, code: int, ext: dict[str, str], request: RemotingCommand) -> None:
        ak = ext.get(ACCESS_KEY)
        if not ak:
            raise AuthenticationError(
                f"[AUTH] {_code_name(code)} needs a signed request (AccessKey/Signature): this NameServer "
                "has authenticationEnabled=true"
            )
        secret = self.secrets.get(ak)
        if secret is None:
            raise AuthenticationError(f"[AUTH] unknown AccessKey {ak[:64]!r}")
        signature = verify(ext, request.body_bytes, secret)
        if signature is None:
            raise AuthenticationError(f"[AUTH] signature check failed for AccessKey {ak[:64]!r}")
        foreign = _FOREIGN_FIELDS.get(code, frozenset()).intersection(ext)
        if foreign or (code in _NO_BODY and request.body):
            what = f"fields {', '.join(sorted(foreign))}" if foreign else "a body"
            raise AuthenticationError(
                f"[AUTH] replayed request refused: {_code_name(code)} does not carry {what} (a signed "
                "request of another code?)"
            )
        if self.replay is not None:
            periodic = code in PERIODIC_CODES and SIGNED_AT not in ext
            reason = self.replay.check(signature, ext, code, refuse_seen=not periodic)
            if reason is not None:
                raise AuthenticationError(f"[AUTH] replayed request refused: {reason}")

    def _remember_read(self, code: int, ext: dict[str, str], request: RemotingCommand) -> None:
        """A read signed by one of our credentials (Apache's mqadmin signs everything): its signature is
        remembered, so that it cannot be sent again as a state-changing request with the same fields."""
        ak = ext.get(ACCESS_KEY)
        secret = self.secrets.get(ak) if ak else None
        if secret is None or self.replay is None:
            return
        signature = verify(ext, request.body_bytes, secret)
        if signature is not None:
            self.replay.check(signature, ext, code, refuse_seen=False)

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        code = request.code
        if code not in NAMESRV_STATE_CHANGING or response is None or response.code != 0:
            return
        ext = request.ext_fields
        if code in PERIODIC_CODES:  # logged once per (peer, broker address), not every 30 s
            key = (remote_addr.rpartition(":")[0], ext.get("brokerAddr", ""))
            if key in self._first_seen:
                return
            if len(self._first_seen) >= _FIRST_SEEN_MAX:
                self._first_seen.clear()
            self._first_seen.add(key)
        who = ext.get(ACCESS_KEY) if self.enabled else None
        by = f" signed by {who[:64]}" if who else " (unauthenticated: authenticationEnabled=false)"
        extra = ""
        if code == C.UPDATE_NAMESRV_CONFIG:
            text = request.body_bytes.decode("utf-8", "replace")
            keys = sorted(line.partition("=")[0].strip() for line in text.splitlines() if "=" in line)
            extra = f" keys={','.join(keys)[:200]}"
        self.audit.record(
            f"{_code_name(code)} from {remote_addr}{_subject(ext)}{extra}{by}", _code_name(code)
        )


def _subject(ext: dict[str, str]) -> str:
    parts = [f"{k}={str(ext[k])[:128]}" for k in _SUBJECT_FIELDS if ext.get(k)]
    return (" " + " ".join(parts)) if parts else ""


def parse_whitelist(text: str) -> frozenset[int]:
    codes = set()
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if not item.lstrip("-").isdigit():
            raise ValueError(f"authenticationWhitelist: {item!r} is not a request code number")
        codes.add(int(item))
    return frozenset(codes)
