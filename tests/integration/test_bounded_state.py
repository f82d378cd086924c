"""Issue 33, item 7 (store side), against real broker processes:

- consumer offsets are only kept for queues that exist: a commit for an unknown topic, a queue past the
  topic's queues, or (past autoCreateSubscriptionGroupLimit) a new group is refused and persists nothing;
- the forced clean above diskSpaceCleanForciblyRatio still deletes unexpired segments (RocketMQ's behaviour)
  but says so: the segments and the unconsumed messages per group are logged and counted.
"""

from __future__ import annotations

import asyncio
import time

import orjson
from tests.integration.broker_support import call, create_topic, pull, run, send, start_cluster

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

C = RequestCode
OK = ResponseCode.SUCCESS


def commit(group: str, topic: str, qid: int, offset: int) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(qid), "commitOffset": str(offset)}
    return RemotingCommand.request(C.UPDATE_CONSUMER_OFFSET, ext)


async def runtime_info(addr: str) -> dict[str, str]:
    return orjson.loads((await call(addr, C.GET_BROKER_RUNTIME_INFO)).body_bytes)["table"]


def test_offsets_only_for_queues_and_groups_that_exist(tmp_path) -> None:
    # 4 built-in groups exist from the start: room for two auto-created ones
    cluster = start_cluster(tmp_path, autoCreateSubscriptionGroupLimit="6")
    try:

        async def go() -> None:
            async with RemotingClient() as c:
                addr = cluster.addr
                assert (await create_topic(c, addr, "Known", 2)).code == OK
                assert (await c.invoke(addr, commit("G1", "Known", 1, 5))).code == OK
                r = await c.invoke(addr, commit("G1", "NoSuchTopic", 0, 5))
                assert r.code == ResponseCode.TOPIC_NOT_EXIST, r.remark
                r = await c.invoke(addr, commit("G1", "Known", 2, 5))
                assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[2]" in r.remark
                r = await c.invoke(addr, commit("G1", "Known", 1_000_000, 5))
                assert r.code == ResponseCode.SYSTEM_ERROR
                assert (await c.invoke(addr, commit("G2", "Known", 0, 1))).code == OK
                # the limit: made-up group names stop creating state (a pull, a commit)
                r = await c.invoke(addr, commit("G3", "Known", 0, 1))
                assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, r.remark
                p = await pull(c, addr, "G4", "Known", 0, 0)
                assert p.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
                # an admin still creates groups past it, and existing groups work as before
                sg = orjson.dumps({"groupName": "G5", "consumeEnable": True, "retryQueueNums": 1})
                r = await c.invoke(
                    addr, RemotingCommand.request(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, sg)
                )
                assert r.code == OK
                assert (await c.invoke(addr, commit("G5", "Known", 0, 2))).code == OK
                assert (await c.invoke(addr, commit("G1", "Known", 1, 6))).code == OK
                r = await c.invoke(addr, RemotingCommand.request(C.GET_ALL_CONSUMER_OFFSET, {}))
                table = orjson.loads(r.body_bytes)["offsetTable"]
                assert table == {"Known@G1": {"1": 6}, "Known@G2": {"0": 1}, "Known@G5": {"0": 2}}

        run(go())
        cluster.restart_broker()  # what was persisted
        saved = orjson.loads((cluster.home / "store" / "config" / "consumerOffset.json").read_bytes())
        assert set(saved["offsetTable"]) == {"Known@G1", "Known@G2", "Known@G5"}
        groups = orjson.loads((cluster.home / "store" / "config" / "subscriptionGroup.json").read_bytes())
        assert not {"G3", "G4"} & set(groups["subscriptionGroupTable"])
    finally:
        cluster.stop()


def test_forced_clean_is_logged_and_counted_per_group(tmp_path) -> None:
    # any disk in use is past 1 %: every pass is a forced clean; small segments, frequent passes
    cluster = start_cluster(
        tmp_path,
        mapedFileSizeCommitLog=str(64 * 1024),
        diskMaxUsedSpaceRatio="1",
        diskSpaceCleanForciblyRatio="1",
        cleanResourceInterval="300",
    )
    try:

        async def go() -> None:
            async with RemotingClient() as c:
                addr = cluster.addr
                assert (await create_topic(c, addr, "Doomed", 1)).code == OK
                assert (await c.invoke(addr, commit("Reader", "Doomed", 0, 0))).code == OK
                for i in range(200):  # ~200 KiB: several 64 KiB segments
                    assert (await send(c, addr, "Doomed", b"%04d" % i + b"x" * 1000, queue_id=0)).code == OK
                assert (await c.invoke(addr, commit("Reader", "Doomed", 0, 10))).code == OK
                deadline = time.monotonic() + 30
                while True:
                    info = await runtime_info(addr)
                    if int(info.get("forcedCleanUnconsumedMessages", 0)) > 0:
                        break
                    assert time.monotonic() < deadline, info
                    await asyncio.sleep(0.2)
                assert int(info["forcedCleanPasses"]) >= 1 and int(info["forcedCleanSegments"]) >= 1
                assert int(info["forcedCleanMessages"]) >= int(info["forcedCleanUnconsumedMessages"]) > 0
                p = await pull(c, addr, "Reader", "Doomed", 0, 10)  # RocketMQ's behaviour: they are gone
                assert p.code == ResponseCode.PULL_OFFSET_MOVED and int(p.ext_fields["minOffset"]) > 10

        run(go())
        out = cluster.broker.output
        assert "deleted unexpired CommitLog segment" in out
        assert "forced clean: consumer group Reader lost" in out, out[-3000:]
    finally:
        cluster.stop()
