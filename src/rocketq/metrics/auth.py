"""Who may read /metrics: HTTP basic auth with an ACL admin account, or a bearer token.

The series name every topic and consumer group and show their traffic and lag, which mqadmin only shows
to admin accounts; so with ``aclEnable=true`` the endpoint takes the ACL file's admin accounts
(``Authorization: Basic base64(accessKey:secretKey)``). ``metricsPromExporterTokenFile`` names a file
holding a token that is accepted as ``Authorization: Bearer <token>`` (Prometheus: ``authorization:
credentials_file``); it is read from a file so that getBrokerConfig, which lists the broker's keys,
never shows it. With neither ACL nor a token the endpoint is open, and binds 127.0.0.1 by default.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from collections.abc import Callable

# accessKey -> (secretKey, admin); read on every request so ACL file changes apply at once
Accounts = Callable[[], dict[str, tuple[str, bool]]]

MIN_TOKEN_LENGTH = 16


class CredentialsError(ValueError):
    pass


def read_token(path: str) -> str:
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as exc:
        raise CredentialsError(f"metricsPromExporterTokenFile: cannot read {path}: {exc}") from None
    if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
        raise CredentialsError(
            f"metricsPromExporterTokenFile: the token in {path} must be at least {MIN_TOKEN_LENGTH} "
            "characters without spaces"
        )
    return token


class MetricsAuth:
    """Allows a request with a valid bearer token or the basic credentials of an ACL admin account."""

    def __init__(self, accounts: Accounts | None = None, token: str | None = None) -> None:
        self.accounts = accounts
        self.token = token.encode() if token else None

    def allows(self, authorization: str | None) -> bool:
        if not authorization:
            return False
        scheme, _, value = authorization.strip().partition(" ")
        scheme = scheme.lower()
        value = value.strip()
        if scheme == "bearer" and self.token is not None:
            return hmac.compare_digest(value.encode(), self.token)
        if scheme == "basic" and self.accounts is not None:
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return False
            access_key, sep, secret = decoded.partition(":")
            if not sep:
                return False
            account = self.accounts().get(access_key)
            if account is None:
                hmac.compare_digest(secret.encode(), b"\0" * 16)  # same work whether the key exists or not
                return False
            expected, admin = account
            return hmac.compare_digest(secret.encode(), expected.encode()) and admin
        return False


def make_auth(token_file: str, accounts: Accounts | None) -> MetricsAuth | None:
    """The authenticator for these settings; None when the endpoint is open (no ACL, no token)."""
    token = read_token(token_file) if token_file else None
    if token is None and accounts is None:
        return None
    return MetricsAuth(accounts, token)
