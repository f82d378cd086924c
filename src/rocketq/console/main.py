"""`rocketq console -n NS [--port 8080] [--bind 127.0.0.1] [--users-file F] [--acl-file F] ...`"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from rocketq.logs import LogSetupError, announce, setup_process_logging
from rocketq.remoting import run

from .cli_args import add_access_args, login_flag
from .config import DEFAULT_PORT, ConsoleConfig, ConsoleConfigError
from .server import ConsoleServer

log = logging.getLogger("rocketq.console")
BOOT_LINE = "The console boot success: "


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rocketq console", description="The web console for a cluster.")
    p.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv",
        default=os.environ.get("NAMESRV_ADDR"),
        help="NameServer address(es) host:port[;host:port] (default $NAMESRV_ADDR)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port ({DEFAULT_PORT}; 0: any free)")
    p.add_argument("--bind", default="127.0.0.1", help="listen address (127.0.0.1; others need a login)")
    add_access_args(p)
    p.add_argument(
        "--acl-file",
        dest="acl_file",
        help="the brokers' plain_acl.yml: ACL is on, its accounts log in and act with their own permissions",
    )
    p.add_argument(
        "--access-key",
        dest="access_key",
        default=os.environ.get("ROCKETQ_ACCESS_KEY"),
        help="the console's own ACL account ($ROCKETQ_ACCESS_KEY)",
    )
    p.add_argument(
        "--secret-key",
        dest="secret_key",
        default=os.environ.get("ROCKETQ_SECRET_KEY"),
        help="its secret key ($ROCKETQ_SECRET_KEY)",
    )
    p.add_argument(
        "--collect-interval",
        dest="interval",
        type=float,
        default=10.0,
        help="seconds between dashboard samples (10)",
    )
    p.add_argument(
        "--home", default=os.environ.get("ROCKETQ_HOME", "~/.rocketq"), help="logs go to HOME/logs"
    )
    p.add_argument("--log-level", default=os.environ.get("ROCKETQ_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def config_from(a: argparse.Namespace) -> ConsoleConfig:
    return ConsoleConfig(
        namesrv=a.namesrv,
        host=a.bind,
        port=a.port,
        users_file=a.users_file,
        acl_file=a.acl_file,
        acl_enabled=bool(a.acl_file),
        access_key=a.access_key,
        secret_key=a.secret_key,
        login_required=login_flag(a.login),
        read_only=a.read_only,
        collect_interval_s=a.interval,
    )


async def serve(config: ConsoleConfig) -> None:
    server = ConsoleServer(config)
    await server.start()
    announce(log, f"{BOOT_LINE}{server.url} (NameServer {config.namesrv})")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await stop.wait()
    finally:
        await server.close()
        announce(log, "rocketq console shutdown.")


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    if not a.namesrv:
        print("rocketq console: pass -n HOST:PORT (or set NAMESRV_ADDR)", file=sys.stderr)
        return 2
    try:
        config = config_from(a)
        config.check()
    except ConsoleConfigError as exc:
        print(f"rocketq console: {exc}", file=sys.stderr)
        return 2
    home = os.path.abspath(os.path.expanduser(a.home))
    try:
        os.makedirs(home, exist_ok=True)
        setup_process_logging(home, a.log_level, {"console.log": None})
    except (OSError, LogSetupError) as exc:
        print(f"rocketq console: {exc}", file=sys.stderr)
        return 2
    try:
        run(serve(config))
    except OSError as exc:
        print(f"rocketq console: cannot listen on {a.bind}:{a.port}: {exc}", file=sys.stderr)
        return 1
    return 0
