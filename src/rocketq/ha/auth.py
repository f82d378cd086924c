"""rocketq's HA authentication: a challenge-response in front of the classic stream, used only when the slave
runs with ACL (aclEnable=true and innerClientAuthenticationCredentials set).

RocketMQ's HA port takes acknowledgements from any TCP client (apache/rocketmq #3015, #1155): whoever connects
can report offsets and release SYNC_MASTER sends that no slave holds. A rocketq master with aclEnable=true
refuses HA connections that do not prove an admin account of its plain_acl.yml, except from the
globalWhiteRemoteAddresses (as every other ACL check does). Wire, all integers big-endian:

  slave -> master  HELLO      magic:i64                                         (8 bytes)
  master -> slave  CHALLENGE  magic:i64 | required:i32 | nonce:16 bytes            (28 bytes)
  slave -> master  PROOF      magic:i64 | keyLen:i16 | accessKey | mac:32 bytes     (only when required)
                   mac = HMAC-SHA256(secretKey, nonce || accessKey)
then the classic reports and transfer frames. magic is the bytes FF 'R' 'Q' 'H' 'A' 'U' 'T' 'H', a negative
offset no classic slave ever reports, so a master tells HELLO from a report by its first 8 bytes. A rocketq
master without ACL answers HELLO with required=0. A slave that hears no CHALLENGE within AUTH_TIMEOUT_S is
talking to a master without this extension (Apache RocketMQ) and reconnects without it. The nonce is fresh per
connection, so a recorded PROOF is worthless on another one. No encryption: run replication over a private
network (or a tunnel) where the bytes themselves must stay confidential.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Callable

from rocketq.remoting.acl_signature import Credentials  # RocketMQ 5's innerClientAuthenticationCredentials

MAGIC = struct.unpack(">q", b"\xffRQHAUTH")[0]
HELLO = struct.pack(">q", MAGIC)
CHALLENGE_SIZE = 28
NONCE_SIZE = 16
MAC_SIZE = 32
MAX_KEY = 255
AUTH_TIMEOUT_S = 3.0

_CHALLENGE = struct.Struct(">qi16s")
_PROOF_HEAD = struct.Struct(">qh")


class HAAuthError(Exception):
    pass


def new_nonce() -> bytes:
    return os.urandom(NONCE_SIZE)


def mac_of(secret_key: str, nonce: bytes, access_key: str) -> bytes:
    return hmac.new(secret_key.encode(), nonce + access_key.encode(), hashlib.sha256).digest()


def encode_challenge(required: bool, nonce: bytes) -> bytes:
    return _CHALLENGE.pack(MAGIC, 1 if required else 0, nonce)


def parse_challenge(buf: bytes) -> tuple[bool, bytes] | None:
    """(required, nonce) from the first CHALLENGE_SIZE bytes; None if fewer arrived."""
    if len(buf) < CHALLENGE_SIZE:
        return None
    magic, required, nonce = _CHALLENGE.unpack_from(buf, 0)
    if magic != MAGIC or required not in (0, 1):
        raise HAAuthError("the master's answer to the HA hello is not a challenge")
    return bool(required), nonce


def encode_proof(creds: Credentials, nonce: bytes) -> bytes:
    ak = creds.access_key.encode()
    if len(ak) > MAX_KEY:
        raise HAAuthError(f"accessKey of {len(ak)} bytes (at most {MAX_KEY} in the HA proof)")
    return _PROOF_HEAD.pack(MAGIC, len(ak)) + ak + mac_of(creds.secret_key, nonce, creds.access_key)


def parse_proof(buf: bytes) -> tuple[str, bytes, int] | None:
    """(accessKey, mac, bytes used) from the start of buf; None if incomplete."""
    if len(buf) < _PROOF_HEAD.size:
        return None
    magic, n = _PROOF_HEAD.unpack_from(buf, 0)
    if magic != MAGIC or not 0 < n <= MAX_KEY:
        raise HAAuthError("malformed HA proof")
    end = _PROOF_HEAD.size + n + MAC_SIZE
    if len(buf) < end:
        return None
    try:
        ak = buf[_PROOF_HEAD.size : _PROOF_HEAD.size + n].decode()
    except UnicodeDecodeError:
        raise HAAuthError("malformed HA proof (accessKey)") from None
    return ak, bytes(buf[end - MAC_SIZE : end]), end


class MasterAuth:
    """The master's side: whose HA connections need a proof, and checking one. The broker supplies its ACL
    (plain_acl.yml) as two callables: is_white(ip), and account(accessKey) -> (secretKey, admin) or None."""

    def __init__(
        self,
        is_white: Callable[[str], bool],
        account: Callable[[str], tuple[str, bool] | None],
    ) -> None:
        self.is_white = is_white
        self.account = account

    def check(self, access_key: str, mac: bytes, nonce: bytes) -> str | None:
        """None when the proof holds; else the reason to refuse."""
        acc = self.account(access_key)
        if acc is None:
            return f"no acl account {access_key!r}"
        secret, admin = acc
        if not hmac.compare_digest(mac_of(secret, nonce, access_key), mac):
            return f"HA proof of {access_key!r} does not match"
        if not admin:
            return f"account {access_key!r} is not admin (replication needs admin: true)"
        return None
