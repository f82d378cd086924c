"""Admin exceptions: every failure the CLI turns into a message and a non-zero exit code."""

from __future__ import annotations


class AdminError(Exception):
    """A request failed. ``code`` is the broker/NameServer response code when there was one."""

    def __init__(self, message: str, code: int | None = None, remark: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.remark = remark


class NamesrvUnreachableError(AdminError):
    """No NameServer of the list answered."""


class TopicNotFoundError(AdminError):
    """The NameServer has no route for the topic."""
