"""AclClientRPCHook: signs every request like RocketMQ's ACL client (for brokers with aclEnable=true and
NameServers with authenticationEnabled=true).

Signature = Base64(HmacSHA1(secretKey, values of the sorted extFields incl. AccessKey [+ SecurityToken],
concatenated, + body)), sent as extFields AccessKey / Signature (/ SecurityToken). State-changing admin and
registration requests also carry a signed ``rqSignedAt`` (remoting/acl_signature.py): rocketq servers refuse
them once they are older than their replay window; Apache servers ignore the field (its value is signed
like any other, so their check passes)."""

from __future__ import annotations

from rocketq.remoting.acl_signature import (
    ACCESS_KEY,
    SECRET_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    STAMPED_CODES,
    SigningHook,
    cal_signature,
    request_content,
)

__all__ = [
    "ACCESS_KEY",
    "SECRET_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "AclClientRPCHook",
    "cal_signature",
    "request_content",
]


class AclClientRPCHook(SigningHook):
    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        super().__init__(access_key, secret_key, security_token, stamp_codes=STAMPED_CODES)
