"""`rocketq standalone [--home DIR] [--namesrv-port 9876] [--broker-port 10911] [-c broker.conf]
[--console-port 8080 | --no-console]`: a NameServer, one master Broker and the web console in one process and
one event loop, data under DIR (~/.rocketq)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from rocketq.broker.config import BrokerConfig, ConfigError, load_config
from rocketq.broker.controller import BrokerController, acl_file
from rocketq.broker.main import boot_line, stop_on_signals
from rocketq.console.embedded import add_console_args, embedded_console
from rocketq.dirlock import StoreLocked
from rocketq.logs import LogSetupError, announce, setup_process_logging
from rocketq.remoting import run
from rocketq.remoting.limits import LIMIT_KEYS

log = logging.getLogger("rocketq.broker")
ns_log = logging.getLogger("rocketq.namesrv")

# The embedded default is sized for a laptop: RocketMQ's production sizes preallocate two 1 GiB CommitLog
# segments, a 420 MB IndexFile and 6 MB per consume queue before the first message; here an empty store
# takes about 75 MB. A key set in broker.conf (either spelling) wins; see docs/configuration.md.
EMBEDDED_STORE_SIZES: dict[str, tuple[int, str | None]] = {  # key -> (value, older spelling)
    "mappedFileSizeCommitLog": (32 * 1024 * 1024, "mapedFileSizeCommitLog"),
    "mappedFileSizeConsumeQueue": (30_000 * 20, "mapedFileSizeConsumeQueue"),
    "maxHashSlotNum": (100_000, None),
    "maxIndexNum": (400_000, None),
}


def apply_embedded_sizes(cfg: BrokerConfig) -> None:
    for key, (value, old) in EMBEDDED_STORE_SIZES.items():
        if key not in cfg.explicit and old not in cfg.explicit:
            cfg.values[key] = value


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rocketq standalone", description="Run a NameServer and a Broker.")
    p.add_argument("--home", default=os.environ.get("ROCKETQ_HOME", "~/.rocketq"), help="data dir")
    p.add_argument("--namesrv-port", type=int, default=9876)
    p.add_argument("--broker-port", type=int, default=None, help="broker listenPort (default 10911)")
    p.add_argument("--bind", default=None, help="listen address (default 127.0.0.1)")
    p.add_argument("-c", "--configFile", dest="config", help="broker.conf (RocketMQ keys)")
    p.add_argument("--log-level", default=os.environ.get("ROCKETQ_LOG_LEVEL", "INFO"))
    add_console_args(p)
    return p.parse_args(argv)


async def start_console(a: argparse.Namespace, cfg: BrokerConfig):  # -> ConsoleServer | None
    """The web console beside the broker; a console that cannot start is reported, the broker goes on."""
    acl = acl_file(cfg) if cfg["aclEnable"] else None
    try:
        console = embedded_console(a, cfg["namesrvAddr"], acl)
        if console is not None:
            await console.start()
            announce(log, f"The console boot success: {console.url}")
        return console
    except Exception as exc:  # a port in use, a bad users file: the broker serves on without a console
        announce(log, f"The console is not started: {exc}")
        return None


async def serve(a: argparse.Namespace, home: str) -> None:
    from rocketq.namesrv.config import NamesrvConfig
    from rocketq.namesrv.controller import BOOT_LINE, NamesrvController

    bind = a.bind or "127.0.0.1"
    ns_cfg = NamesrvConfig()
    ns_cfg.listen_port = a.namesrv_port
    ns_cfg.bind_address = bind
    ns_cfg.home = home
    overrides: dict[str, object] = {}
    if a.broker_port is not None:
        overrides["listenPort"] = a.broker_port
    cfg = load_config(a.config, overrides)
    apply_embedded_sizes(cfg)
    if "storePathRootDir" not in cfg.explicit:
        cfg.values["storePathRootDir"] = os.path.join(home, "store")
        if "storePathCommitLog" not in cfg.explicit:
            cfg.values["storePathCommitLog"] = os.path.join(cfg["storePathRootDir"], "commitlog")
    if cfg["aclEnable"] and cfg["innerClientAuthenticationCredentials"]:
        # ACL on: the NameServer authenticates route changes with the broker's credentials
        ns_cfg.authentication_enabled = True
        ns_cfg.inner_client_authentication_credentials = cfg["innerClientAuthenticationCredentials"]
    ns_cfg.limit_props = {k: str(cfg[k]) for k in LIMIT_KEYS if k in cfg.explicit}  # the same remoting limits
    # one node: the HA port opens only when broker.conf asks for it (haListenPort), to let a slave follow
    broker = BrokerController(cfg, a.bind, ha_listen="haListenPort" in cfg.explicit)
    # both homes are locked before either is read: a second standalone on this home changes nothing
    namesrv = NamesrvController(ns_cfg)
    namesrv.home_lock.acquire()
    try:
        broker.lock_store()
    except BaseException:
        namesrv.home_lock.release()
        raise
    await namesrv.start()
    announce(ns_log, BOOT_LINE)
    cfg.values["namesrvAddr"] = f"{'127.0.0.1' if bind in ('0.0.0.0', '::') else bind}:{namesrv.server.port}"
    for line in cfg.listing():
        log.info("broker config %s", line)
    try:
        await broker.start()
    except BaseException:
        await namesrv.close()
        raise
    announce(log, boot_line(broker))
    console = await start_console(a, cfg)
    stop = stop_on_signals()
    try:
        await stop.wait()
    finally:
        if console is not None:
            await console.close()
        await broker.shutdown()
        await namesrv.close()
        announce(log, "rocketq standalone shutdown.")


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    home = os.path.abspath(os.path.expanduser(a.home))
    try:
        os.makedirs(home, exist_ok=True)
        setup_process_logging(home, a.log_level, {"namesrv.log": "rocketq.namesrv", "broker.log": None})
    except (OSError, LogSetupError) as exc:
        print(f"rocketq standalone: {exc}", file=sys.stderr)
        return 2
    try:
        run(serve(a, home))
    except StoreLocked as exc:
        print(f"rocketq standalone: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:
        print(f"rocketq standalone: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rocketq standalone: {exc}", file=sys.stderr)
        return 1
    return 0
