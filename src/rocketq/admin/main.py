"""`rocketq admin COMMAND [-n HOST:PORT] [flags]` (alias `mqadmin`): RocketMQ's mqadmin commands.

-n falls back to $NAMESRV_ADDR, as in RocketMQ. Exit codes: 0 ok, 1 a request failed (NameServer
unreachable, topic missing, broker error), 2 bad command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from rocketq.remoting import run
from rocketq.remoting.acl_signature import STAMPED_CODES, SigningHook

from . import cmd_cluster, cmd_consumer, cmd_ha, cmd_message, cmd_topic  # noqa: F401  (register the commands)
from .client import AdminClient
from .errors import AdminError
from .registry import COMMANDS, UsageError

PROG = "mqadmin"


def usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = [
        f"usage: {PROG} <command> -n HOST:PORT [args]",
        "",
        "The most commonly used mqadmin commands are:",
    ]
    lines += [f"   {name.ljust(width)}  {cmd.summary}" for name, cmd in COMMANDS.items()]
    lines += ["", f"See '{PROG} <command> -h' for more information on a specific command."]
    return "\n".join(lines)


def build_parser(name: str) -> argparse.ArgumentParser:
    cmd = COMMANDS[name]
    p = argparse.ArgumentParser(prog=f"{PROG} {name}", description=cmd.summary)
    p.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv",
        default=os.environ.get("NAMESRV_ADDR"),
        help="NameServer address list, e.g. 127.0.0.1:9876;127.0.0.2:9876 (default $NAMESRV_ADDR)",
    )
    p.add_argument("--timeout", type=float, default=5.0, help="request timeout in seconds (5)")
    cmd.add_args(p)
    return p


def tools_hook(env: dict[str, str] | None = None) -> SigningHook | None:
    """Signs every request when RocketMQ's tools credentials exist: $ROCKETMQ_TOOLS_FILE, else
    $ROCKETMQ_HOME/conf/tools.yml (``accessKey:`` / ``secretKey:``), as Apache's mqadmin does."""
    env = dict(os.environ) if env is None else env
    path = env.get("ROCKETMQ_TOOLS_FILE") or (
        os.path.join(env["ROCKETMQ_HOME"], "conf", "tools.yml") if env.get("ROCKETMQ_HOME") else ""
    )
    if not path or not os.path.isfile(path):
        return None
    import yaml

    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    ak, sk = data.get("accessKey"), data.get("secretKey")
    if not ak or not sk:
        raise UsageError(f"{path}: needs accessKey and secretKey")
    return SigningHook(str(ak), str(sk), stamp_codes=STAMPED_CODES)


async def _run(name: str, args: argparse.Namespace, out: TextIO) -> int:
    async with AdminClient(args.namesrv, timeout_s=args.timeout, rpc_hook=tools_hook()) as admin:
        return int(await COMMANDS[name].run(admin, args, out) or 0)


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    if not argv or argv[0] in ("-h", "--help", "help"):
        if len(argv) >= 2 and argv[0] == "help" and argv[1] in COMMANDS:
            build_parser(argv[1]).print_help(out)
            return 0
        out.write(usage() + "\n")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        sys.stderr.write(f"{PROG}: unknown command {name!r}\n\n{usage()}\n")
        return 2
    parser = build_parser(name)
    try:
        args = parser.parse_args(rest)
    except SystemExit as exc:  # -h prints help and exits 0; bad flags exit 2
        return int(exc.code or 0)
    if not args.namesrv:
        sys.stderr.write(f"{PROG} {name}: no NameServer address: pass -n HOST:PORT or set NAMESRV_ADDR\n")
        return 2
    try:
        return run(_run(name, args, out))
    except UsageError as exc:
        sys.stderr.write(f"{PROG} {name}: {exc}\n")
        return 2
    except AdminError as exc:
        sys.stderr.write(f"{PROG} {name}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
