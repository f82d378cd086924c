"""Command-line options shared by `rocketq console` and `rocketq standalone` (no heavy imports: the
standalone reads them even when it runs without a console)."""

from __future__ import annotations

import argparse


def add_access_args(p: argparse.ArgumentParser | argparse._ArgumentGroup, prefix: str = "") -> None:
    """The login / ACL options, shared with `rocketq standalone` (which prefixes them with "console-")."""
    p.add_argument(
        f"--{prefix}users-file",
        dest="users_file",
        help="accounts allowed to log in: name=password[,1] per line (1 = admin; others read-only)",
    )
    p.add_argument(
        f"--{prefix}login",
        dest="login",
        choices=("auto", "always", "never"),
        default="auto",
        help="require a login: auto (when a users file is given); off loopback or with ACL on, always",
    )
    p.add_argument(
        f"--{prefix}read-only", dest="read_only", action="store_true", help="refuse every change (view only)"
    )


def login_flag(value: str) -> bool | None:
    return {"always": True, "never": False}.get(value)
