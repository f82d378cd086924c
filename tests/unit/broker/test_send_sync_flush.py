"""SYNC_FLUSH sends through an in-process broker: acknowledged only once an fdatasync round covers the
record (the FlushWaiter path), FLUSH_DISK_TIMEOUT after syncFlushTimeout when the disk stalls."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from rocketq.broker.config import load_config
from rocketq.broker.controller import BrokerController
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.message_id import decode_offset_msg_id
from rocketq.protocol.properties import properties_to_string
from rocketq.remoting import RemotingClient
from rocketq.store.linux_aio import FdsyncContext


def _send(topic: str, body: bytes, props: dict[str, str]) -> RemotingCommand:
    ext = {
        "a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0", "k": "false",
    }  # fmt: skip
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body)


def _stall_disk(monkeypatch, backend: str) -> list[float]:
    """While stall[0] > 0 every fdatasync round takes that many seconds longer."""
    stall = [0.0]
    if backend == "thread":
        real = os.fdatasync

        def fdatasync(fd):
            if stall[0]:
                time.sleep(stall[0])
            real(fd)

        monkeypatch.setattr(os, "fdatasync", fdatasync)
    else:  # the round is submitted to the kernel that much later (on the loop, as the real submission is)
        submit = FdsyncContext.submit

        def late_submit(self, fds, tag):
            if stall[0]:
                asyncio.get_running_loop().call_later(stall[0], submit, self, fds, tag)
            else:
                submit(self, fds, tag)

        monkeypatch.setattr(FdsyncContext, "submit", late_submit)
    return stall


def _flush_timeout(ms: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, f"syncFlushTimeout={ms}\n".encode())


@pytest.mark.parametrize("backend", ["native-aio", "thread"])
def test_sync_flush_send_waits_for_fdatasync_and_times_out_on_a_stalled_disk(tmp_path, monkeypatch, backend):
    stall = _stall_disk(monkeypatch, backend)

    async def go():
        cfg = load_config(None, {
            "storePathRootDir": str(tmp_path), "listenPort": 0, "brokerIP1": "127.0.0.1",
            "flushDiskType": "SYNC_FLUSH", "syncFlushTimeout": 5000,
            "syncFlushNativeAio": backend != "thread",
            "diskSpaceWarningLevelRatio": "100",  # the shared disk's fill level is not tested here
        })  # fmt: skip
        ctl = BrokerController(cfg)
        await ctl.start()
        try:
            assert ctl.flush_waiter is not None
            assert ctl.flush_waiter.timeout == 5.0
            assert ctl.store.flush_backend == backend
            addr = ctl.broker_addr
            async with RemotingClient() as c:
                ext = {"topic": "SF", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}
                r = await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext))
                assert r.code == ResponseCode.SUCCESS
                rs = await asyncio.gather(*(c.invoke(addr, _send("SF", b"x" * 100, {})) for _ in range(20)))
                for r in rs:
                    assert r.code == ResponseCode.SUCCESS, r.remark
                    assert ctl.store.flushed_phy_offset > decode_offset_msg_id(r.ext_fields["msgId"]).offset
                # A short syncFlushTimeout for the stall only (a real fdatasync on a shared host takes longer
                # than 300 ms now and then), set as an operator would, at runtime
                r = await c.invoke(addr, _flush_timeout(300))
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert ctl.flush_waiter.timeout == 0.3
                # WAIT=false does not wait (answered even while the disk stalls)
                stall[0] = 1.0
                t0 = time.monotonic()
                r = await c.invoke(addr, _send("SF", b"w", {"WAIT": "false"}))
                assert r.code == ResponseCode.SUCCESS and time.monotonic() - t0 < 0.5
                r = await c.invoke(addr, _send("SF", b"late", {"TAGS": "t"}), 5.0)
                assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT
                assert time.monotonic() - t0 < 0.95  # answered by the timeout, not by the stalled round
                stall[0] = 0.0
                assert (await c.invoke(addr, _flush_timeout(5000))).code == ResponseCode.SUCCESS
                await asyncio.sleep(1.2)
                r = await c.invoke(addr, _send("SF", b"ok", {}))
                assert r.code == ResponseCode.SUCCESS
        finally:
            await ctl.shutdown()

    asyncio.run(go())
