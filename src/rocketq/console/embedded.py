"""The console inside `rocketq standalone`: its command-line options and how they become a ConsoleConfig."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .cli_args import add_access_args, login_flag
from .config import DEFAULT_PORT, ConsoleConfig

if TYPE_CHECKING:
    from .server import ConsoleServer


def add_console_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("web console")
    g.add_argument(
        "--console-port",
        dest="console_port",
        type=int,
        default=DEFAULT_PORT,
        help=f"web console port ({DEFAULT_PORT}; 0: any free port)",
    )
    g.add_argument(
        "--console-bind",
        dest="console_bind",
        default="127.0.0.1",
        help="web console listen address (127.0.0.1; others need a login)",
    )
    g.add_argument("--no-console", dest="no_console", action="store_true", help="run without the web console")
    add_access_args(g, "console-")


def first_admin(acl_path: str) -> tuple[str, str] | None:
    """The first admin account of plain_acl.yml: the embedded console's own identity towards its broker."""
    from .auth import ROLE_ADMIN, parse_acl

    try:
        with open(acl_path, encoding="utf-8") as f:
            accounts, _ = parse_acl(f.read())
    except (OSError, ValueError):
        return None
    for acc in accounts.values():
        if acc.role == ROLE_ADMIN:
            return acc.name, acc.password
    return None


def embedded_console(a: argparse.Namespace, namesrv: str, acl_path: str | None) -> ConsoleServer | None:
    if a.no_console:
        return None
    from .server import ConsoleServer  # aiohttp and the pages: only when the console runs

    ident = first_admin(acl_path) if acl_path else None
    return ConsoleServer(
        ConsoleConfig(
            namesrv=namesrv,
            host=a.console_bind,
            port=a.console_port,
            users_file=a.users_file,
            acl_file=acl_path,
            acl_enabled=acl_path is not None,
            access_key=ident[0] if ident else None,
            secret_key=ident[1] if ident else None,
            login_required=login_flag(a.login),
            read_only=a.read_only,
            cluster_label="standalone",
        )
    )
