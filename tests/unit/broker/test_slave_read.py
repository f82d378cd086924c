"""suggestWhichBrokerId of a pull answer (RocketMQ's PullMessageProcessor rules), broker/replication.py."""

from __future__ import annotations

import struct

from rocketq.broker.config import load_config
from rocketq.broker.replication import SlaveRead
from rocketq.protocol.bodies import SubscriptionGroupConfig
from rocketq.protocol.codes import ResponseCode


class Result:
    def __init__(self, phys: int | None) -> None:
        rec = bytearray(100)
        if phys is not None:
            struct.pack_into(">q", rec, 28, phys)
        self.buffers = [memoryview(bytes(rec))] if phys is not None else []
        self.released = False

    def release(self) -> None:
        self.released = True


class Store:
    max_phy_offset = 10_000_000


def read(role: str, enable: bool, ratio_bytes: int | None = None, **kw) -> SlaveRead:
    cfg = load_config(None, {"brokerRole": role, "brokerId": "1" if role == "SLAVE" else "0",
                             "slaveReadEnable": str(enable).lower(), **kw})  # fmt: skip
    sr = SlaveRead(cfg)
    if ratio_bytes is not None:
        sr.memory_limit = ratio_bytes  # the 40 % of the machine's memory, made small
    return sr


OK = int(ResponseCode.SUCCESS)
group = SubscriptionGroupConfig("G")


def test_master_without_slave_read_always_suggests_itself():
    assert read("ASYNC_MASTER", False, 10).suggest(OK, Result(0), group, Store()) == (OK, "0")


def test_master_with_slave_read_sends_slow_consumers_to_a_slave():
    sr = read("SYNC_MASTER", True, 1_000_000)
    assert sr.suggest(OK, Result(9_500_000), group, Store()) == (OK, "0")  # in memory: stay
    assert sr.suggest(OK, Result(5_000_000), group, Store()) == (OK, "1")  # 5 MB behind > limit: slave 1
    slow2 = SubscriptionGroupConfig("G2", which_broker_when_consume_slowly=2)
    assert sr.suggest(OK, Result(5_000_000), slow2, Store()) == (OK, "2")  # the group's own choice
    sr = read("SYNC_MASTER", True, 1_000_000, whichBrokerWhenConsumeSlowly="3")
    assert sr.suggest(OK, Result(5_000_000), group, Store()) == (OK, "3")  # broker.conf's default


def test_slave_not_lagging_sends_the_client_back_to_the_master():
    assert read("SLAVE", True, 1_000_000).suggest(OK, Result(9_900_000), group, Store()) == (OK, "0")


def test_slave_without_slave_read_serves_nothing():
    r = Result(9_900_000)
    code, which = read("SLAVE", False).suggest(OK, r, group, Store())
    assert (code, which) == (int(ResponseCode.PULL_RETRY_IMMEDIATELY), "0") and r.released
