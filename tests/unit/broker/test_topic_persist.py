"""UPDATE_AND_CREATE_TOPIC / DELETE_TOPIC are answered only once the change is in config/topics.json (as
RocketMQ persists the topic table before answering), and a failed write is answered as an error."""

from __future__ import annotations

import asyncio
import errno
import os
import time

import orjson

from rocketq.broker import persist
from rocketq.broker.config import load_config
from rocketq.broker.controller import BrokerController
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient


def test_topic_changes_are_answered_after_they_are_on_disk(tmp_path, monkeypatch):
    real = persist.write_atomic
    mode = ["slow"]

    def write_atomic(path, data):
        if path.endswith("topics.json"):
            if mode[0] == "fail":
                raise OSError(errno.ENOSPC, "injected")
            time.sleep(0.3)  # a slow disk: the answer must wait for it
        real(path, data)

    monkeypatch.setattr(persist, "write_atomic", write_atomic)

    async def go():
        overrides = {"storePathRootDir": str(tmp_path), "listenPort": 0, "brokerIP1": "127.0.0.1"}
        cfg = load_config(None, overrides)
        ctl = BrokerController(cfg)
        await ctl.start()
        path = os.path.join(str(tmp_path), "config", "topics.json")

        def on_disk() -> set[str]:
            with open(path, "rb") as f:
                return set(orjson.loads(f.read())["topicConfigTable"])

        try:
            async with RemotingClient() as c:
                ext = {"topic": "TP", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}
                req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
                r = await c.invoke(ctl.broker_addr, req, 5.0)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert "TP" in on_disk()
                req = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TP"})
                r = await c.invoke(ctl.broker_addr, req, 5.0)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert "TP" not in on_disk()
                mode[0] = "fail"
                ext = {**ext, "topic": "TQ"}
                req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
                r = await c.invoke(ctl.broker_addr, req, 5.0)
                assert r.code == ResponseCode.SYSTEM_ERROR and "not persisted" in (r.remark or "")
                mode[0] = "slow"
        finally:
            await ctl.shutdown()

    asyncio.run(go())
