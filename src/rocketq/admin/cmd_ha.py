"""haStatus (RocketMQ 5's mqadmin command): a master's slaves — address, acknowledged offset, lag in bytes and
in time, in sync or falling behind — or a slave's link to its master."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, TextIO

from .client import AdminClient
from .fmt import fmt_ms
from .registry import command


def _args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help="which broker to fetch")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")
    p.add_argument("-i", "--interval", type=int, default=0, help="repeat every N seconds")


def _print(addr: str, st: dict[str, Any], out: TextIO) -> None:
    if st.get("master"):
        conns = st.get("haConnectionInfo") or []
        out.write(f"\n#MasterAddr\t{addr}\n#Role\t{st.get('brokerRole', '')}\n")
        out.write(f"#MasterCommitLogMaxOffset\t{st.get('masterCommitLogMaxOffset', 0)}\n")
        out.write(f"#SlaveNum\t{len(conns)}\n#InSyncSlaveNum\t{st.get('inSyncSlaveNums', 0)}\n")
        head = ("#SlaveAddr", "#SlaveAckOffset", "#Diff", "#Lag(ms)", "#AckLagP99(ms)",
                "#TransferSpeed(KB/s)", "#Status", "#TransferFromWhere")  # fmt: skip
        out.write(f"{head[0]:<24} {head[1]:>16} {head[2]:>12} {head[3]:>9} {head[4]:>14} {head[5]:>20} "
                  f"{head[6]:>12} {head[7]:>18}\n")  # fmt: skip
        for c in conns:
            status = "OK" if c.get("inSync") else "Fall Behind"
            out.write(
                f"{c.get('addr', ''):<24} {c.get('slaveAckOffset', -1):>16} {c.get('diff', 0):>12} "
                f"{c.get('lagMillis', 0):>9} {c.get('ackLagMillisP99', 0):>14.2f} "
                f"{c.get('transferredByteInSecond', 0) / 1024.0:>20.2f} "
                f"{status:>12} {c.get('transferFromWhere', -1):>18}\n"
            )
        for d in st.get("recentlyDropped") or []:
            out.write(
                f"#Dropped\t{d.get('addr', '')}\t{fmt_ms(int(d.get('at', 0)))}\t{d.get('reason', '')}\n"
            )
        return
    c = st.get("haClientRuntimeInfo") or {}
    out.write(f"\n#MasterAddr\t{c.get('masterAddr', '')}\n")
    out.write(f"#CommitLogMaxOffset\t{c.get('maxOffset', 0)}\n")
    out.write(f"#TransferSpeed(KB/s)\t{c.get('transferredByteInSecond', 0) / 1024.0:.2f}\n")
    out.write(f"#LastReadTime\t{fmt_ms(int(c.get('lastReadTimestamp', 0)))}\n")
    out.write(f"#LastWriteTime\t{fmt_ms(int(c.get('lastWriteTimestamp', 0)))}\n")
    out.write(f"#MasterFlushOffset\t{c.get('masterFlushOffset', 0)}\n")
    out.write(f"#State\t{c.get('state', '')}\n")
    if c.get("lastError"):
        out.write(f"#LastError\t{c['lastError']}\n")
    if st.get("metadataSyncError"):
        out.write(f"#MetadataSyncError\t{st['metadataSyncError']}\n")


@command("haStatus", "Fetch ha runtime status data", _args)
async def ha_status(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    while True:
        targets = [a.broker_addr] if a.broker_addr else list((await admin.master_addrs(a.cluster)).values())
        for addr in targets:
            _print(addr, await admin.ha_status(addr), out)
        if a.interval <= 0:
            return 0
        out.flush()
        await asyncio.sleep(a.interval)
