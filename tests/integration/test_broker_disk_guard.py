"""The disk guards are broker.conf keys: a broker whose disk is past diskSpaceWarningLevelRatio refuses writes
with SERVICE_NOT_AVAILABLE (14) and keeps serving reads."""

from __future__ import annotations

import os

from tests.integration.broker_support import create_topic, pull, run, send, start_cluster

from rocketq.protocol.codes import ResponseCode
from rocketq.remoting import RemotingClient


def _used_percent(path: str) -> float:
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return 100.0 * used / (used + st.f_bavail * st.f_frsize)


def test_disk_past_warning_level_refuses_sends_and_serves_pulls(tmp_path):
    assert _used_percent(str(tmp_path)) > 1.0, "the guard threshold below must be under the disk's usage"
    cluster = start_cluster(tmp_path, diskSpaceWarningLevelRatio="1")
    try:

        async def go():
            async with RemotingClient() as c:
                assert (await create_topic(c, cluster.addr, "DG", 1)).code == ResponseCode.SUCCESS
                r = await send(c, cluster.addr, "DG", b"x", queue_id=0)
                assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
                assert r.remark
                p = await pull(c, cluster.addr, "CG", "DG", 0, 0)
                assert p.code == ResponseCode.PULL_NOT_FOUND, (p.code, p.remark)

        run(go())
    finally:
        cluster.stop()
