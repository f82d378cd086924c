"""Exceptions raised by the remoting layer (names follow RocketMQ's remoting exceptions)."""

from __future__ import annotations


class RemotingError(Exception):
    """Base class of every remoting failure."""


class RemotingConnectError(RemotingError):
    """Could not connect to the address, or the connection was lost while a request was pending."""

    def __init__(self, addr: str, reason: str = "") -> None:
        super().__init__(f"connect to {addr} failed" + (f": {reason}" if reason else ""))
        self.addr = addr


class RemotingSendRequestError(RemotingError):
    """The request could not be written (channel already closed)."""

    def __init__(self, addr: str, reason: str = "") -> None:
        super().__init__(f"send request to {addr} failed" + (f": {reason}" if reason else ""))
        self.addr = addr


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response arrived within the timeout."""

    def __init__(self, addr: str, timeout_s: float) -> None:
        super().__init__(f"wait response from {addr} timed out after {timeout_s:g} s")
        self.addr = addr
        self.timeout_s = timeout_s
