"""ConsoleConfig: where the console listens, which cluster it shows, who may log in."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

DEFAULT_PORT = 8080
MAX_REQUEST_BYTES = 1024 * 1024  # a test message body or a batch of ids; nothing the console takes is larger


class ConsoleConfigError(ValueError):
    """A console setting that cannot work (e.g. a public bind address with no accounts to log in with)."""


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(slots=True)
class ConsoleConfig:
    namesrv: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    # dashboard-style accounts: "name=password[,1]" per line (1: admin, may change things; else read-only)
    users_file: str | None = None
    # RocketMQ's plain_acl.yml: its accounts may log in, and the ACL page shows it; set when aclEnable=true
    acl_file: str | None = None
    acl_enabled: bool = False
    # the console's own identity towards ACL-enabled brokers, for users who log in from users_file
    access_key: str | None = None
    secret_key: str | None = None
    login_required: bool | None = None  # None: required when bound off loopback, ACL is on, or users_file set
    read_only: bool = False
    collect_interval_s: float = 10.0
    history_points: int = 360  # one hour of dashboard history at the default interval
    session_idle_s: float = 3600.0
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    cluster_label: str = ""  # shown in the header (e.g. "standalone")

    def must_login(self) -> bool:
        """Off loopback or with ACL on, a login is required whatever the options say."""
        return (not is_loopback(self.host)) or self.acl_enabled

    def needs_login(self) -> bool:
        if self.must_login():
            return True
        if self.login_required is not None:
            return self.login_required
        return bool(self.users_file)

    def check(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConsoleConfigError(f"console port {self.port} is out of range")
        if self.login_required is False and self.must_login():
            why = "ACL is on" if self.acl_enabled else f"it listens on {self.host}, not on loopback"
            raise ConsoleConfigError(f"the console cannot run without a login: {why}")
        if self.needs_login() and not (self.users_file or self.acl_file):
            why = "ACL is on" if self.acl_enabled else f"it listens on {self.host}, not on loopback"
            raise ConsoleConfigError(
                f"the console requires a login because {why}, but has no accounts: pass --users-file "
                "(name=password[,1] lines, like rocketmq-dashboard's users.properties) or --acl-file"
            )
        if self.collect_interval_s < 1:
            raise ConsoleConfigError("the collect interval is at least 1 second")
