"""ACL request signing (AclClientRPCHook)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from rocketq.client.acl import AclClientRPCHook
from rocketq.protocol.frame import RemotingCommand


def test_signature_covers_sorted_ext_values_and_body() -> None:
    req = RemotingCommand.request(310, {"b": "TopicA", "a": "PG", "e": "-1"}, b"body")
    AclClientRPCHook("ak123", "sk456").do_before_request("127.0.0.1:10911", req)
    ext = req.ext_fields
    assert ext["AccessKey"] == "ak123"
    # values sorted by key: AccessKey, a, b, e ; then the body
    content = b"ak123" + b"PG" + b"TopicA" + b"-1" + b"body"
    expected = base64.b64encode(hmac.new(b"sk456", content, hashlib.sha1).digest()).decode()
    assert ext["Signature"] == expected
    # signing twice (a retried request) gives the same signature
    AclClientRPCHook("ak123", "sk456").do_before_request("x", req)
    assert req.ext_fields["Signature"] == expected


def test_security_token_is_signed() -> None:
    req = RemotingCommand.request(34, {}, b"{}")
    AclClientRPCHook("ak", "sk", "tok").do_before_request("x", req)
    content = b"ak" + b"tok" + b"{}"
    assert req.ext_fields["SecurityToken"] == "tok"
    assert (
        req.ext_fields["Signature"]
        == base64.b64encode(hmac.new(b"sk", content, hashlib.sha1).digest()).decode()
    )
