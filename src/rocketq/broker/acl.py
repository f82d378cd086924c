"""Plain ACL (aclEnable=true): RocketMQ's PlainAccessValidator as a server RPC hook.

plain_acl.yml (RocketMQ's format):

    globalWhiteRemoteAddresses: ["10.10.103.*"]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress: 192.168.0.*
        admin: false
        defaultTopicPerm: DENY            # DENY | PUB | SUB | PUB|SUB
        defaultGroupPerm: SUB
        topicPerms: ["topicA=DENY", "topicB=PUB|SUB"]
        groupPerms: ["groupA=DENY", "groupB=PUB|SUB"]

A request passes when its remote address matches a global white address; otherwise it must carry a known
AccessKey and a valid Signature (Base64 HmacSHA1 over the values of its sorted extFields, minus Signature and
_UNIQUE_KEY_QUERY, followed by the body), and the account must hold the permission the request code needs:
admin requests need admin=true; sends need PUB on the topic; pulls, offsets and heartbeats need SUB on the
topic and the group; queue-offset, stats, consumer-list, queue-lock and consume-directly requests need SUB on
the topic or group they name (RocketMQ 5 asks GET there). A refused request is answered with an error naming
the reason; nothing else changes. Requests that reach a stored message are checked again by the topics of the
message itself (read_acl.py), whatever their header says.
The file is re-read when its modification time changes.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import hmac
import logging
import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from rocketq.protocol import lenient_json
from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.properties import RETRY_GROUP_TOPIC_PREFIX
from rocketq.remoting import RPCHook
from rocketq.remoting.acl_signature import BROKER_STATE_CHANGING, ReplayGuard

log = logging.getLogger(__name__)

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"

DENY, PUB, SUB = 1, 2, 4
_PERMS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}

C = RequestCode
ADMIN_CODES = frozenset(
    {
        C.UPDATE_AND_CREATE_TOPIC,
        C.DELETE_TOPIC_IN_BROKER,
        C.UPDATE_BROKER_CONFIG,
        C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        C.DELETE_SUBSCRIPTIONGROUP,
        C.INVOKE_BROKER_TO_RESET_OFFSET,
        C.GET_BROKER_CONFIG,
        C.GET_ALL_TOPIC_CONFIG,
        C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        C.GET_ALL_CONSUMER_OFFSET,
        C.GET_ALL_DELAY_OFFSET,
    }
)


_SEND_V1 = frozenset({C.SEND_MESSAGE, C.SEND_REPLY_MESSAGE})
_SEND_V2 = frozenset({C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE, C.SEND_REPLY_MESSAGE_V2})


class AclError(PermissionError):
    pass


def signature(content: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.new(secret_key.encode(), content, hashlib.sha1).digest()).decode()


def request_content(ext: dict[str, str], body: bytes, with_unique_flag: bool = False) -> bytes:
    skip = (SIGNATURE,) if with_unique_flag else (SIGNATURE, UNIQUE_KEY_QUERY)
    values = "".join(v for k, v in sorted(ext.items()) if k not in skip)
    return values.encode() + body


def _perm(text: Any, where: str) -> int:
    p = _PERMS.get(str(text).strip().upper())
    if p is None:
        raise ValueError(f"{where}: bad permission {text!r} (DENY, PUB, SUB or PUB|SUB)")
    return p


def _addr_matches(pattern: str, ip: str) -> bool:
    # RocketMQ accepts *, ranges like 192.168.1.1-100 and {a,b}; wildcards and exact addresses cover the usual
    pattern = pattern.strip()
    if not pattern:
        return False
    if "-" in pattern.rsplit(".", 1)[-1]:
        head, _, last = pattern.rpartition(".")
        lo, _, hi = last.partition("-")
        ip_head, _, ip_last = ip.rpartition(".")
        return (
            ip_head == head
            and ip_last.isdigit()
            and lo.isdigit()
            and hi.isdigit()
            and (int(lo) <= int(ip_last) <= int(hi))
        )
    return fnmatch.fnmatchcase(ip, pattern)


@dataclass
class Account:
    access_key: str
    secret_key: str
    white_remote_address: str = ""
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    resource_perms: dict[str, int] = field(default_factory=dict)  # topic or %RETRY%group -> perm


class PlainAcl:
    def __init__(self, path: str) -> None:
        self.path = path
        self.mtime = -1.0
        self.global_white: list[str] = []
        self.accounts: dict[str, Account] = {}
        self.reload()

    def reload(self) -> None:
        import yaml

        try:
            mtime = os.stat(self.path).st_mtime
        except OSError as exc:
            raise ValueError(f"ACL file {self.path}: {exc}") from None
        if mtime == self.mtime:
            return
        with open(self.path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
        if not isinstance(data, dict):
            raise ValueError(f"ACL file {self.path}: not a mapping")
        accounts: dict[str, Account] = {}
        for i, raw in enumerate(data.get("accounts") or []):
            where = f"{self.path}: accounts[{i}]"
            if not isinstance(raw, dict) or not raw.get("accessKey") or raw.get("secretKey") is None:
                raise ValueError(f"{where}: accessKey and secretKey are required")
            secret = str(raw["secretKey"])
            if len(secret) < 6:
                raise ValueError(f"{where}: secretKey must have at least 6 characters")
            acc = Account(
                str(raw["accessKey"]),
                secret,
                str(raw.get("whiteRemoteAddress") or ""),
                bool(raw.get("admin", False)),
                _perm(raw.get("defaultTopicPerm", "DENY"), where),
                _perm(raw.get("defaultGroupPerm", "DENY"), where),
            )
            for item in raw.get("topicPerms") or []:
                name, _, p = str(item).partition("=")
                acc.resource_perms[name.strip()] = _perm(p, where)
            for item in raw.get("groupPerms") or []:
                name, _, p = str(item).partition("=")
                acc.resource_perms[RETRY_GROUP_TOPIC_PREFIX + name.strip()] = _perm(p, where)
            accounts[acc.access_key] = acc
        self.global_white = [str(a) for a in data.get("globalWhiteRemoteAddresses") or []]
        self.accounts = accounts
        self.mtime = mtime

    def maybe_reload(self) -> None:
        try:
            self.reload()
        except Exception as exc:  # keep the last good rules
            log.error("reloading %s failed: %s", self.path, exc)


_GROUP_READS = frozenset(
    {
        C.GET_CONSUMER_LIST_BY_GROUP,
        C.GET_CONSUMER_CONNECTION_LIST,
        C.GET_CONSUME_STATS,
        C.GET_CONSUMER_RUNNING_INFO,
        C.CONSUME_MESSAGE_DIRECTLY,
    }
)
_TOPIC_READS = frozenset(
    {
        C.GET_MAX_OFFSET,
        C.GET_MIN_OFFSET,
        C.SEARCH_OFFSET_BY_TIMESTAMP,
        C.GET_EARLIEST_MSG_STORETIME,
        C.GET_TOPIC_STATS_INFO,
        C.QUERY_TOPIC_CONSUME_BY_WHO,
    }
)


def _json_body(request: RemotingCommand) -> dict[str, Any]:
    try:
        data = orjson.loads(request.body_bytes)
    except orjson.JSONDecodeError:
        data = lenient_json.loads(request.body_bytes)
    return data if isinstance(data, dict) else {}


def _needed(request: RemotingCommand) -> dict[str, int]:
    """resource -> permission this request needs (groups as %RETRY%<group>)."""
    code = request.code
    ext = request.ext_fields
    need: dict[str, int] = {}
    if code in (C.SEND_MESSAGE, C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE, C.SEND_REPLY_MESSAGE,
                C.SEND_REPLY_MESSAGE_V2):  # fmt: skip
        topic = (
            ext.get("b")
            if code in (C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE, C.SEND_REPLY_MESSAGE_V2)
            else None
        )
        topic = topic or ext.get("topic", "")
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            need[topic] = SUB
        else:
            need[topic] = PUB
    elif code == C.CONSUMER_SEND_MSG_BACK:
        need[RETRY_GROUP_TOPIC_PREFIX + ext.get("group", "")] = SUB
    elif code in (C.PULL_MESSAGE, C.QUERY_CONSUMER_OFFSET, C.UPDATE_CONSUMER_OFFSET):
        need[ext.get("topic", "")] = SUB
        need[RETRY_GROUP_TOPIC_PREFIX + ext.get("consumerGroup", "")] = SUB
    elif code == C.UNREGISTER_CLIENT and ext.get("consumerGroup"):
        need[RETRY_GROUP_TOPIC_PREFIX + ext["consumerGroup"]] = SUB
    elif code in _GROUP_READS:  # what RocketMQ 5's authorization asks of these (GET maps to SUB here)
        need[RETRY_GROUP_TOPIC_PREFIX + ext.get("consumerGroup", "")] = SUB
        if code == C.GET_CONSUME_STATS and ext.get("topic"):
            need[ext["topic"]] = SUB
    elif code in _TOPIC_READS:
        need[ext.get("topic", "")] = SUB
    elif code in (C.LOCK_BATCH_MQ, C.UNLOCK_BATCH_MQ):
        data = _json_body(request)
        need[RETRY_GROUP_TOPIC_PREFIX + str(data.get("consumerGroup", ""))] = SUB
        for mq in data.get("mqSet") or ():
            if isinstance(mq, dict):
                need[str(mq.get("topic", ""))] = SUB
    elif code == C.HEART_BEAT:
        data = _json_body(request)
        for cd in data.get("consumerDataSet") or ():
            need[RETRY_GROUP_TOPIC_PREFIX + str(cd.get("groupName", ""))] = SUB
            for sd in cd.get("subscriptionDataSet") or ():
                topic = str(sd.get("topic", ""))
                if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    need[topic] = SUB
    return need


class AclHook(RPCHook):
    """Server-side RPC hook: raises AclError (answered as an error response) for refused requests."""

    def __init__(self, acl: PlainAcl, replay_window_s: float = 120.0) -> None:
        self.acl = acl
        # signed admin requests seen again within the window are refused (remoting/acl_signature.py)
        self.replay = ReplayGuard(replay_window_s) if replay_window_s > 0 else None

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        acl = self.acl
        acl.maybe_reload()
        ip = remote_addr.rpartition(":")[0].strip("[]")
        if any(_addr_matches(p, ip) for p in acl.global_white):
            return
        ext = request.ext_fields
        ak = ext.get(ACCESS_KEY)
        if not ak:
            raise AclError(f"[ACL] no AccessKey in request code {request.code} from {ip}")
        acc = acl.accounts.get(ak)
        if acc is None:
            raise AclError(f"[ACL] no acl config for {ak}")
        if acc.white_remote_address and _addr_matches(acc.white_remote_address, ip):
            return
        given = ext.get(SIGNATURE, "")
        body = request.body_bytes
        expected = signature(request_content(ext, body), acc.secret_key)
        if not hmac.compare_digest(expected, given) and not (
            # Java clients sign header fields only (not _UNIQUE_KEY_QUERY); other clients sign every field
            UNIQUE_KEY_QUERY in ext
            and hmac.compare_digest(signature(request_content(ext, body, True), acc.secret_key), given)
        ):
            raise AclError(f"[ACL] check signature failed for accessKey={ak}")
        if self.replay is not None and request.code in BROKER_STATE_CHANGING:
            reason = self.replay.check(given, ext, request.code)
            if reason is not None:
                raise AclError(f"[ACL] replayed request refused: {reason}")
        if request.code in ADMIN_CODES:
            if not acc.admin:
                raise AclError(f"[ACL] request code {request.code} needs admin permission, accessKey={ak}")
            return
        if acc.admin:
            return
        for resource, perm in _needed(request).items():
            if not permits(acc, resource, perm):
                raise AclError(refusal(acc, resource, perm))

    def subject(self, remote_addr: str, request: RemotingCommand) -> Account | None:
        """The account whose permissions limit this (already authenticated) request; None when nothing
        does: a white-listed address or an admin account."""
        acl = self.acl
        ip = remote_addr.rpartition(":")[0].strip("[]")
        if any(_addr_matches(p, ip) for p in acl.global_white):
            return None
        ak = request.ext_fields.get(ACCESS_KEY) or ""
        acc = acl.accounts.get(ak)
        if acc is None:  # the file changed since the request was authenticated
            raise AclError(f"[ACL] no acl config for {ak}")
        if acc.admin or (acc.white_remote_address and _addr_matches(acc.white_remote_address, ip)):
            return None
        return acc


def permits(acc: Account, resource: str, perm: int) -> bool:
    """Does the account hold perm (PUB or SUB) on a topic, or on a group given as %RETRY%<group>?"""
    is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
    have = acc.resource_perms.get(resource, acc.default_group_perm if is_group else acc.default_topic_perm)
    return have != DENY and bool(have & perm)


def refusal(acc: Account, resource: str, perm: int) -> str:
    is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
    kind = "group" if is_group else "topic"
    name = resource[len(RETRY_GROUP_TOPIC_PREFIX) :] if is_group else resource
    return (
        f"[ACL] no {'PUB' if perm == PUB else 'SUB'} permission for {kind} {name}, accessKey={acc.access_key}"
    )
