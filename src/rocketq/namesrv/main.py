"""`rocketq namesrv [-p PORT] [--bind HOST] [--home DIR] [-c namesrv.conf]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from rocketq.dirlock import StoreLocked
from rocketq.logs import announce, setup_process_logging
from rocketq.remoting import run

from .config import NamesrvConfig, read_properties
from .controller import BOOT_LINE, NamesrvController, auth_hook_of

log = logging.getLogger(__name__)


def parse_args(argv: list[str]) -> NamesrvConfig:
    p = argparse.ArgumentParser(prog="rocketq namesrv", description="Run a NameServer.")
    p.add_argument("-c", "--config", help="namesrv.conf (Java properties: listenPort, kvConfigPath, ...)")
    p.add_argument("-p", "--port", type=int, help="listen port (default 9876)")
    p.add_argument("--bind", help="listen address (default 127.0.0.1)")
    p.add_argument("--home", help="home directory; KV config in <home>/namesrv/ (default ~/.rocketq)")
    p.add_argument("--broker-expire-s", type=float, help="drop brokers not re-registered within this (120)")
    p.add_argument("--scan-interval-s", type=float, help="how often to look for expired brokers (10)")
    p.add_argument("--idle-timeout-s", type=float, help="close connections idle this long (120)")
    p.add_argument("--log-level", default=os.environ.get("ROCKETQ_LOG_LEVEL", "INFO"))
    a = p.parse_args(argv)
    cfg = NamesrvConfig()
    if a.config:
        cfg.apply_properties(read_properties(a.config))
    cfg.apply_env()
    if a.port is not None:
        cfg.listen_port = a.port
    if a.bind:
        cfg.bind_address = a.bind
    if a.home:
        cfg.home = a.home
    if a.broker_expire_s:
        cfg.broker_channel_expired_s = a.broker_expire_s
    if a.scan_interval_s:
        cfg.scan_not_active_broker_interval_s = a.scan_interval_s
    if a.idle_timeout_s:
        cfg.server_channel_max_idle_s = a.idle_timeout_s
    auth_hook_of(cfg)  # bad credentials stop the NameServer here, with the key's name
    setup_process_logging(cfg.home, a.log_level, {"namesrv.log": None})  # LogSetupError: a ValueError
    return cfg


async def serve(cfg: NamesrvConfig) -> None:
    controller = NamesrvController(cfg)
    await controller.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    announce(log, BOOT_LINE)
    try:
        await stop.wait()
    finally:
        await controller.close()


def main(argv: list[str]) -> int:
    try:
        cfg = parse_args(argv)
    except (OSError, ValueError) as exc:
        print(f"rocketq namesrv: {exc}", file=sys.stderr)
        return 2
    try:
        run(serve(cfg))
    except (StoreLocked, ValueError) as exc:  # ValueError: e.g. an unreadable metricsPromExporterTokenFile
        print(f"rocketq namesrv: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # e.g. address in use
        print(f"rocketq namesrv: {exc}", file=sys.stderr)
        return 1
    return 0
