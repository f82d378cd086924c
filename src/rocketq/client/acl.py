"""AclClientRPCHook: signs every request like RocketMQ's ACL client (for brokers with aclEnable=true).

Signature = Base64(HmacSHA1(secretKey, values of the sorted extFields incl. AccessKey [+ SecurityToken],
concatenated, + body)), sent as extFields AccessKey / Signature (/ SecurityToken)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RPCHook

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def cal_signature(content: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.new(secret_key.encode(), content, hashlib.sha1).digest()).decode()


def request_content(ext: dict[str, str], body: bytes) -> bytes:
    values = "".join(v for k, v in sorted(ext.items()) if k != SIGNATURE and v is not None)
    return values.encode() + body


class AclClientRPCHook(RPCHook):
    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        ext = request.ext_fields
        ext[ACCESS_KEY] = self.access_key
        if self.security_token:
            ext[SECURITY_TOKEN] = self.security_token
        ext.pop(SIGNATURE, None)
        ext[SIGNATURE] = cal_signature(request_content(ext, request.body_bytes), self.secret_key)
