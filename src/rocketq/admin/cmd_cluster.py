"""Cluster and broker commands: clusterList, brokerStatus."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import TextIO

from .client import AdminClient
from .errors import AdminError
from .fmt import table
from .registry import command

# MQVersion ordinals -> names, for the versions clients commonly report.
VERSION_NAMES = {
    121: "V3_4_9",
    213: "V4_0_0",
    273: "V4_3_0",
    355: "V4_7_1",
    373: "V4_8_0",
    393: "V4_9_0",
    401: "V4_9_4",
    409: "V4_9_8",
    413: "V5_0_0",
}


def version_desc(v: int | str) -> str:
    try:
        n = int(v)
    except (TypeError, ValueError):
        return str(v)
    return VERSION_NAMES.get(n, str(n))


def _first_float(text: str) -> float:
    try:
        return float(text.split()[0]) if text else 0.0
    except ValueError:
        return 0.0


def _hours_since(ms_text: str) -> str:
    """Hours of messages the broker holds (RocketMQ's #Hour column); '-' when it holds none."""
    try:
        ms = int(ms_text)
    except ValueError:
        return "-"
    if ms <= 0:
        return "-"
    return f"{(time.time() * 1000 - ms) / 3_600_000:.2f}"


def _cluster_list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--moreStats", dest="more", action="store_true", help="print in/out totals")
    p.add_argument("-i", "--interval", type=int, default=0, help="repeat every N seconds")


async def _print_cluster(admin: AdminClient, more: bool, out: TextIO) -> None:
    info = await admin.cluster_info()
    brokers = info["brokerAddrTable"]
    rows: list[tuple[object, ...]] = []
    for cluster in sorted(info["clusterAddrTable"]):
        for name in sorted(info["clusterAddrTable"][cluster]):
            addrs = (brokers.get(name) or {}).get("brokerAddrs") or {}
            for bid in sorted(addrs, key=lambda k: int(k)):
                addr = addrs[bid]
                try:
                    rt = await admin.broker_runtime_info(addr)
                except AdminError:
                    rt = {}
                if more:
                    rows.append(
                        (
                            cluster,
                            name,
                            rt.get("msgPutTotalYesterdayMorning", "0"),
                            rt.get("msgGetTotalYesterdayMorning", "0"),
                            rt.get("msgPutTotalTodayNow", "0"),
                            rt.get("msgGetTotalTodayNow", "0"),
                        )
                    )
                else:
                    in_tps = _first_float(rt.get("putTps", ""))
                    out_tps = _first_float(rt.get("getTransferedTps", rt.get("getTransferredTps", "")))
                    rows.append(
                        (
                            cluster,
                            name,
                            bid,
                            addr,
                            rt.get("brokerVersionDesc", "-"),
                            f"{in_tps:.2f}",
                            f"{out_tps:.2f}",
                            rt.get("pageCacheLockTimeMills", "0"),
                            _hours_since(rt.get("earliestMessageTimeStamp", "")),
                            rt.get("commitLogDiskRatio", "-"),
                            rt.get("brokerRole", "-"),
                        )
                    )
    if more:
        headers: tuple[str, ...] = (
            "Cluster Name",
            "Broker Name",
            "InTotalYest",
            "OutTotalYest",
            "InTotalToday",
            "OutTotalToday",
        )
    else:
        headers = (
            "Cluster Name",
            "Broker Name",
            "BID",
            "Addr",
            "Version",
            "InTPS",
            "OutTPS",
            "PCWait(ms)",
            "Hour",
            "SPACE",
            "ROLE",
        )
    table(out, headers, rows)


@command("clusterList", "List the cluster's brokers", _cluster_list_args)
async def cluster_list(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    while True:
        await _print_cluster(admin, a.more, out)
        if a.interval <= 0:
            return 0
        out.flush()
        await asyncio.sleep(a.interval)


def _broker_status_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address ip:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every broker of this cluster")


@command("brokerStatus", "Fetch a broker's runtime status", _broker_status_args)
async def broker_status(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    if a.broker_addr:
        rt = await admin.broker_runtime_info(a.broker_addr)
        width = max((len(k) for k in rt), default=0)
        for k in sorted(rt):
            out.write(f"{k.ljust(width)} : {rt[k]}\n")
        return 0
    masters = await admin.master_addrs(a.cluster)
    rows = []
    for addr in masters.values():
        rt = await admin.broker_runtime_info(addr)
        rows.extend((addr, k, rt[k]) for k in sorted(rt))
    table(out, ("Broker Addr", "Key", "Value"), rows)
    return 0


@command("getBrokerConfig", "Print a broker's configuration", _broker_status_args)
async def get_broker_config(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    targets = [a.broker_addr] if a.broker_addr else list((await admin.master_addrs(a.cluster)).values())
    for addr in targets:
        cfg = await admin.broker_config(addr)
        out.write(f"============{addr}============\n")
        width = max((len(k) for k in cfg), default=0)
        for k in sorted(cfg):
            out.write(f"{k.ljust(width)} = {cfg[k]}\n")
    return 0


def _update_broker_config_args(p: argparse.ArgumentParser) -> None:
    _broker_status_args(p)
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


@command(
    "updateBrokerConfig",
    "Update a broker's configuration (applied at once, saved into its broker.conf)",
    _update_broker_config_args,
)
async def update_broker_config(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    # with -c: every broker of the cluster, slaves too, as RocketMQ's command does
    targets = [a.broker_addr] if a.broker_addr else await admin.broker_addrs(a.cluster)
    for addr in targets:
        remark = await admin.update_broker_config(addr, {a.key: a.value})
        out.write(f"update broker config success, {addr}\n")
        if remark:
            out.write(f"  {remark}\n")
    return 0


def _kv_args(with_value: bool) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("-s", "--namespace", required=True, help="KV namespace")
        p.add_argument("-k", "--key", required=True, help="key")
        if with_value:
            p.add_argument("-v", "--value", required=True, help="value")

    return add


@command("updateKvConfig", "Create or update a NameServer KV config entry", _kv_args(True))
async def update_kv_config(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    await admin.put_kv_config(a.namespace, a.key, a.value)
    out.write("update kv config in namespace success.\n")
    return 0


@command("deleteKvConfig", "Delete a NameServer KV config entry", _kv_args(False))
async def delete_kv_config(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    await admin.delete_kv_config(a.namespace, a.key)
    out.write("delete kv config from namespace success.\n")
    return 0
