"""RocketMQ's request signature (ACL 1.0, also what RocketMQ 5's remoting authentication checks) and a guard
against replayed signed requests.

Signature = Base64(HmacSHA1(secretKey, the values of the request's extFields sorted by key, concatenated,
followed by the body)), carried in the extFields ``AccessKey`` / ``Signature`` (/ ``SecurityToken``). Apache
clients sign their header fields, which are exactly the extFields they send, so a server checks the values of
every extField but ``Signature`` (and, for old clients, ``_UNIQUE_KEY_QUERY``).

What the scheme leaves open (docs/security.md, "Replay"): no timestamp or nonce, so a captured request can be
sent again; the request code is not signed, so a request can be re-sent under another code with the same
header fields (ADD_WRITE_PERM_OF_BROKER ↔ WIPE_WRITE_PERM_OF_BROKER); values are concatenated without
separators, so characters can move between adjacent fields (or an empty field be added) under the same
signature. All of these keep the signature, so :class:`ReplayGuard`, keyed on the signature alone, refuses
each of them for as long as it remembers the original. rocketq's own signers add ``rqSignedAt`` (ms since
the epoch) and ``rqSignedCode`` (the request code), signed like any field, to state-changing requests; a
server refuses a stamped request older than the window or sent under another code, which closes replay and
code substitution for good for them. Apache signers do not stamp: for their requests the guard is the window.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import orjson

from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand

from .hook import RPCHook

log = logging.getLogger(__name__)

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
SIGNED_AT = "rqSignedAt"  # rocketq: when a state-changing request was signed (ms since the epoch)
SIGNED_CODE = "rqSignedCode"  # rocketq: the request code it was signed for (the scheme does not sign it)

_C = RequestCode
# Requests that change a broker's or a NameServer's state: a server refuses replays of them, rocketq's
# signers stamp them.
BROKER_STATE_CHANGING = frozenset(
    {
        _C.UPDATE_AND_CREATE_TOPIC,
        _C.DELETE_TOPIC_IN_BROKER,
        _C.UPDATE_BROKER_CONFIG,
        _C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        _C.DELETE_SUBSCRIPTIONGROUP,
        _C.INVOKE_BROKER_TO_RESET_OFFSET,
    }
)
NAMESRV_STATE_CHANGING = frozenset(
    {
        _C.REGISTER_BROKER,
        _C.UNREGISTER_BROKER,
        _C.QUERY_DATA_VERSION,  # refreshes a broker's liveness, as a registration does
        _C.WIPE_WRITE_PERM_OF_BROKER,
        _C.ADD_WRITE_PERM_OF_BROKER,
        _C.DELETE_TOPIC_IN_NAMESRV,
        _C.PUT_KV_CONFIG,
        _C.DELETE_KV_CONFIG,
        _C.UPDATE_NAMESRV_CONFIG,
    }
)
STAMPED_CODES = BROKER_STATE_CHANGING | NAMESRV_STATE_CHANGING


def cal_signature(content: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.new(secret_key.encode(), content, hashlib.sha1).digest()).decode()


def request_content(
    ext: Mapping[str, str | None], body: bytes, skip: Collection[str] = (SIGNATURE,)
) -> bytes:
    values = "".join(v for k, v in sorted(ext.items()) if k not in skip and v is not None)
    return values.encode() + body


def verify(ext: Mapping[str, str], body: bytes, secret_key: str) -> str | None:
    """The request's Signature if it is valid for ``secret_key``, else None. Java clients leave
    _UNIQUE_KEY_QUERY out of what they sign, other signers sign every field: either is accepted."""
    given = ext.get(SIGNATURE)
    if not given:
        return None
    skip = (SIGNATURE, UNIQUE_KEY_QUERY)
    if hmac.compare_digest(cal_signature(request_content(ext, body, skip), secret_key), given):
        return given
    if UNIQUE_KEY_QUERY in ext and hmac.compare_digest(
        cal_signature(request_content(ext, body), secret_key), given
    ):
        return given
    return None


@dataclass(frozen=True, slots=True)
class Credentials:
    access_key: str
    secret_key: str

    @classmethod
    def parse(cls, text: str, key: str = "innerClientAuthenticationCredentials") -> Credentials | None:
        """RocketMQ 5's JSON forms: {"accessKey": .., "secretKey": ..} or {"username": .., "password": ..}.
        Empty text → None; anything malformed → ValueError naming ``key``."""
        text = (text or "").strip()
        if not text:
            return None
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise ValueError(f'{key}: not JSON (expected {{"accessKey":..,"secretKey":..}})') from None
        if not isinstance(obj, dict):
            raise ValueError(f"{key}: expected a JSON object")
        ak = obj.get("accessKey", obj.get("username"))
        sk = obj.get("secretKey", obj.get("password"))
        if not isinstance(ak, str) or not isinstance(sk, str) or not ak or not sk:
            raise ValueError(f"{key}: needs a non-empty accessKey and secretKey (or username and password)")
        if len(sk) < 6:
            raise ValueError(f"{key}: the secret must have at least 6 characters")
        return cls(ak, sk)


class SigningHook(RPCHook):
    """Client-side hook: signs every request like Apache's AclClientRPCHook. Requests whose code is in
    ``stamp_codes`` also carry ``rqSignedAt`` (signed), which lets a rocketq server refuse them for good once
    they are older than its replay window."""

    def __init__(
        self,
        access_key: str,
        secret_key: str,
        security_token: str | None = None,
        *,
        stamp_codes: Collection[int] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token
        self.stamp_codes = frozenset(stamp_codes)
        self.clock = clock

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        ext = request.ext_fields
        ext[ACCESS_KEY] = self.access_key
        if self.security_token:
            ext[SECURITY_TOKEN] = self.security_token
        if request.code in self.stamp_codes:
            ext[SIGNED_AT] = str(int(self.clock() * 1000))
            ext[SIGNED_CODE] = str(request.code)
        ext.pop(SIGNATURE, None)
        ext[SIGNATURE] = cal_signature(request_content(ext, request.body_bytes), self.secret_key)


class ReplayGuard:
    """Remembers the signatures of accepted state-changing requests for twice ``window_s`` and refuses one
    seen again; refuses a request stamped (``rqSignedAt``) more than ``window_s`` away from this clock. At
    most ``max_entries`` signatures are kept: past that the oldest are forgotten early (the window shrinks
    under a flood of validly signed requests, which only a holder of a secret can send), with a WARNING."""

    def __init__(
        self, window_s: float = 120.0, max_entries: int = 100_000, clock: Callable[[], float] = time.time
    ) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self.clock = clock
        self.seen: OrderedDict[str, float] = OrderedDict()
        self.evicted = 0
        self._warned_at = -1e18

    def check(
        self, signature: str, ext: Mapping[str, str], code: int, *, refuse_seen: bool = True
    ) -> str | None:
        """None (accepted and remembered) or why the request is refused. refuse_seen=False: remember the
        signature (so that it cannot be reused for a state-changing request) without refusing a repeat (reads,
        and the registrations Apache brokers repeat unchanged)."""
        now = self.clock()
        signed_code = ext.get(SIGNED_CODE)
        if signed_code is not None and signed_code != str(code):
            return f"signed for request code {signed_code[:12]}, sent as {code}"
        stamp = ext.get(SIGNED_AT)
        if stamp is not None:
            try:
                skew = abs(now - int(stamp) / 1000.0)
            except ValueError:
                return f"{SIGNED_AT} is not a number"
            if skew > self.window_s:
                return (
                    f"the request was signed {skew:.0f} s away from this server's clock (allowed "
                    f"{self.window_s:g} s): a replay, or clocks out of sync"
                )
        seen = self.seen
        horizon = now - 2 * self.window_s
        while seen:
            _, at = next(iter(seen.items()))
            if at >= horizon:
                break
            seen.popitem(last=False)
        first = seen.get(signature)
        if first is not None:
            if not refuse_seen:
                return None
            return (
                f"an identical signed request was accepted {now - first:.0f} s ago: replays are refused "
                f"for {2 * self.window_s:g} s"
            )
        if len(seen) >= self.max_entries:
            seen.popitem(last=False)
            self.evicted += 1
            if now - self._warned_at > 60:
                self._warned_at = now
                log.warning(
                    "replay guard full (%d signatures): forgetting the oldest early (%d so far)",
                    self.max_entries,
                    self.evicted,
                )
        seen[signature] = now
        return None
