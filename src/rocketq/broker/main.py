"""`rocketq broker -n NS [-c broker.conf] [--home DIR] [--bind HOST] [-p]` (mqbroker)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from rocketq.dirlock import StoreLocked
from rocketq.logs import LogSetupError, announce, setup_process_logging
from rocketq.remoting import run

from .config import BrokerConfig, ConfigError, load_config
from .controller import BrokerController

log = logging.getLogger(__name__)


def boot_line(ctl: BrokerController) -> str:
    line = f"The broker[{ctl.cfg['brokerName']}, {ctl.broker_addr}] boot success. serializeType=JSON"
    ns = ctl.cfg["namesrvAddr"]
    return f"{line} and name server is {ns}" if ns else line


def build_parser(prog: str = "rocketq broker") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run a Broker.")
    p.add_argument(
        "-n", "--namesrvAddr", dest="namesrv", help="name server address list, e.g. 127.0.0.1:9876;host2:9876"
    )
    p.add_argument("-c", "--configFile", dest="config", help="broker.conf (Java properties, RocketMQ keys)")
    p.add_argument(
        "--home", help="home directory: the store goes to <home>/store unless storePathRootDir is set"
    )
    p.add_argument("--bind", help="listen address (default brokerIP1, i.e. 127.0.0.1)")
    p.add_argument("--port", type=int, help="listenPort override")
    p.add_argument(
        "-p", "--printConfigItem", dest="print_config", action="store_true", help="print config and exit"
    )
    p.add_argument("--log-level", default=os.environ.get("ROCKETQ_LOG_LEVEL", "INFO"))
    return p


def config_from_args(a: argparse.Namespace) -> BrokerConfig:
    overrides: dict[str, object] = {}
    if a.namesrv:
        overrides["namesrvAddr"] = a.namesrv
    if a.port is not None:
        overrides["listenPort"] = a.port
    cfg = load_config(a.config, overrides)
    if a.home and not _set_in_file(cfg, "storePathRootDir"):
        root = os.path.join(os.path.expanduser(a.home), "store")
        cfg.values["storePathRootDir"] = root
        if not _set_in_file(cfg, "storePathCommitLog"):
            cfg.values["storePathCommitLog"] = os.path.join(root, "commitlog")
    if not cfg["namesrvAddr"] and os.environ.get("NAMESRV_ADDR"):
        cfg.values["namesrvAddr"] = os.environ["NAMESRV_ADDR"]
    return cfg


def _set_in_file(cfg: BrokerConfig, key: str) -> bool:
    return key in cfg.explicit


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM / SIGINT (where the loop supports signal handlers)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    return stop


async def serve(ctl: BrokerController, ready=None) -> None:
    await ctl.start()
    stop = stop_on_signals()
    announce(log, boot_line(ctl))
    if ready is not None:
        ready()
    try:
        await stop.wait()
    finally:
        await ctl.shutdown()
        announce(log, f"The broker[{ctl.cfg['brokerName']}, {ctl.broker_addr}] shutdown.")


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(a)
    except ConfigError as exc:
        print(f"rocketq broker: {exc}", file=sys.stderr)
        return 2
    if a.print_config:
        print("\n".join(cfg.listing()))
        return 0
    # RocketMQ logs to ~/logs/rocketmqlogs: the parent of its default store (~/store) is that home
    home = (
        a.home or os.environ.get("ROCKETQ_HOME") or os.path.dirname(os.path.abspath(cfg["storePathRootDir"]))
    )
    try:
        setup_process_logging(home, a.log_level, {"broker.log": None})
    except LogSetupError as exc:
        print(f"rocketq broker: {exc}", file=sys.stderr)
        return 2
    for line in cfg.listing():
        log.info("broker config %s", line)
    try:
        ctl = BrokerController(cfg, a.bind)
    except ConfigError as exc:
        print(f"rocketq broker: {exc}", file=sys.stderr)
        return 2
    try:
        run(serve(ctl))
    except (StoreLocked, ConfigError) as exc:
        print(f"rocketq broker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"rocketq broker: {exc}", file=sys.stderr)
        return 1
    return 0
