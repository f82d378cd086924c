"""Admin processors over the wire: stats, connections, runtime info, reset offset, locks, delete topic,
and the relays to a consumer (307/309)."""

from __future__ import annotations

import asyncio
import time

import orjson
from tests.integration.broker_support import (
    cluster_fixture,
    create_topic,
    heartbeat,
    pull,
    records,
    run,
    send,
    send_ext,
)

from rocketq.protocol import lenient_json
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

C = RequestCode
rq = RemotingCommand.request


cluster = cluster_fixture("broker-admin")


def _mq_table(body: bytes) -> dict[tuple[str, int], dict]:
    obj = lenient_json.loads(body)
    return {(k.to_dict()["topic"], k.to_dict()["queueId"]): v for k, v in obj["offsetTable"].items()}


def test_stats_and_connections(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "ST", 2)
            for i in range(5):
                await send(c, addr, "ST", b"s%d" % i, queue_id=i % 2)
            r = await c.invoke(addr, rq(C.GET_TOPIC_STATS_INFO, {"topic": "ST"}))
            assert r.code == ResponseCode.SUCCESS
            t = _mq_table(r.body_bytes)
            assert t[("ST", 0)]["maxOffset"] == 3 and t[("ST", 1)]["maxOffset"] == 2
            assert t[("ST", 0)]["minOffset"] == 0 and t[("ST", 0)]["lastUpdateTimestamp"] > 0
            r = await c.invoke(addr, rq(C.GET_TOPIC_STATS_INFO, {"topic": "Nope"}))
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            upd = {"consumerGroup": "CGS", "topic": "ST", "queueId": "0", "commitOffset": "2"}
            await c.invoke(addr, rq(C.UPDATE_CONSUMER_OFFSET, upd))
            r = await c.invoke(addr, rq(C.GET_CONSUME_STATS, {"consumerGroup": "CGS", "topic": "ST"}))
            t = _mq_table(r.body_bytes)
            assert t[("ST", 0)]["brokerOffset"] == 3 and t[("ST", 0)]["consumerOffset"] == 2
            assert t[("ST", 1)]["consumerOffset"] == 0
            r = await c.invoke(addr, rq(C.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CGS"}))
            assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
            await heartbeat(c, addr, "1.2.3.4@9", "CGS", {"ST": "TagA || TagB"})
            r = await c.invoke(addr, rq(C.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CGS"}))
            conn = orjson.loads(r.body_bytes)
            assert conn["connectionSet"][0]["clientId"] == "1.2.3.4@9"
            assert conn["messageModel"] == "CLUSTERING"
            assert sorted(conn["subscriptionTable"]["ST"]["tagsSet"]) == ["TagA", "TagB"]
            r = await c.invoke(addr, rq(C.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"}))
            assert r.code == ResponseCode.SUCCESS
            r = await c.invoke(addr, rq(C.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "ST"}))
            assert "CGS" in orjson.loads(r.body_bytes)["groupList"]
            r = await c.invoke(addr, rq(C.GET_BROKER_RUNTIME_INFO, {}))
            table = orjson.loads(r.body_bytes)["table"]
            assert table["brokerVersionDesc"] == "V4_9_8" and int(table["bootTimestamp"]) > 0
            assert int(table["msgPutTotalTodayNow"]) >= 5
            assert int(table["earliestMessageTimeStamp"]) > 0
            assert len(table["putTps"].split()) == 3 and "getTransferedTps" in table
            r = await c.invoke(addr, rq(C.GET_ALL_CONSUMER_OFFSET, {}))
            assert orjson.loads(r.body_bytes)["offsetTable"]["ST@CGS"]["0"] == 2
            r = await c.invoke(addr, rq(C.GET_ALL_DELAY_OFFSET, {}))
            assert "offsetTable" in orjson.loads(r.body_bytes)

    run(go())


def test_reset_offset_by_time_notifies_consumers(cluster):
    addr = cluster.addr

    async def go():
        resets = []
        async with RemotingClient() as c:
            c.register_processor(C.RESET_CONSUMER_CLIENT_OFFSET, lambda ch, req: resets.append(req) or None)
            await create_topic(c, addr, "RS", 1)
            await send(c, addr, "RS", b"old", queue_id=0)
            await asyncio.sleep(0.05)
            mid = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            await send(c, addr, "RS", b"new", queue_id=0)
            await heartbeat(c, addr, "5.6.7.8@1", "CGRS", {"RS": "*"})
            upd = {"consumerGroup": "CGRS", "topic": "RS", "queueId": "0", "commitOffset": "2"}
            await c.invoke(addr, rq(C.UPDATE_CONSUMER_OFFSET, upd))
            ext = {"topic": "RS", "group": "CGRS", "timestamp": str(mid), "isForce": "true"}
            r = await c.invoke(addr, rq(C.INVOKE_BROKER_TO_RESET_OFFSET, ext))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert _mq_table(r.body_bytes)[("RS", 0)] == 1
            q = {"consumerGroup": "CGRS", "topic": "RS", "queueId": "0"}
            r = await c.invoke(addr, rq(C.QUERY_CONSUMER_OFFSET, q))
            assert r.ext_fields["offset"] == "1"
            for _ in range(60):
                if resets:
                    break
                await asyncio.sleep(0.05)
            assert len(resets) == 1 and resets[0].ext_fields["group"] == "CGRS"
            # -1 = reset to the end
            ext = {**ext, "timestamp": "-1"}
            r = await c.invoke(addr, rq(C.INVOKE_BROKER_TO_RESET_OFFSET, ext))
            assert _mq_table(r.body_bytes)[("RS", 0)] == 2

    run(go())


def test_lock_batch(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            mqs = [{"brokerName": "broker-t", "queueId": i, "topic": "LK"} for i in range(2)]
            body = {"consumerGroup": "CGL", "clientId": "A", "mqSet": mqs}
            r = await c.invoke(addr, rq(C.LOCK_BATCH_MQ, {}, orjson.dumps(body)))
            assert len(orjson.loads(r.body_bytes)["lockOKMQSet"]) == 2
            r = await c.invoke(addr, rq(C.LOCK_BATCH_MQ, {}, orjson.dumps({**body, "clientId": "B"})))
            assert orjson.loads(r.body_bytes)["lockOKMQSet"] == []
            await c.invoke(addr, rq(C.UNLOCK_BATCH_MQ, {}, orjson.dumps({**body, "mqSet": mqs[:1]})))
            r = await c.invoke(addr, rq(C.LOCK_BATCH_MQ, {}, orjson.dumps({**body, "clientId": "B"})))
            assert [m["queueId"] for m in orjson.loads(r.body_bytes)["lockOKMQSet"]] == [0]

    run(go())


def test_delete_topic_and_groups(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "DEL", 1)
            await send(c, addr, "DEL", b"x", queue_id=0)
            r = await c.invoke(addr, rq(C.DELETE_TOPIC_IN_BROKER, {"topic": "DEL"}))
            assert r.code == ResponseCode.SUCCESS
            r = await send(c, addr, "DEL", b"x", queue_id=0)
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await create_topic(c, addr, "SCHEDULE_TOPIC_XXXX", 1)
            assert r.code == ResponseCode.SYSTEM_ERROR  # system topics are reserved
            sg = {"groupName": "CGNEW", "retryMaxTimes": 3}
            r = await c.invoke(addr, rq(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, orjson.dumps(sg)))
            assert r.code == ResponseCode.SUCCESS
            r = await c.invoke(addr, rq(C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}))
            assert orjson.loads(r.body_bytes)["subscriptionGroupTable"]["CGNEW"]["retryMaxTimes"] == 3
            r = await c.invoke(addr, rq(C.DELETE_SUBSCRIPTIONGROUP, {"groupName": "CGNEW"}))
            r = await c.invoke(addr, rq(C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}))
            assert "CGNEW" not in orjson.loads(r.body_bytes)["subscriptionGroupTable"]

    run(go())


def test_relays_to_consumer(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as admin, RemotingClient() as consumer:

            def running_info(ch, req):
                return req.response(ResponseCode.SUCCESS, None, None, b'{"mqTable":{}}')

            def directly(ch, req):
                return req.response(ResponseCode.SUCCESS, None, None, b'{"got":%d}' % len(records(req)))

            consumer.register_processor(C.GET_CONSUMER_RUNNING_INFO, running_info)
            consumer.register_processor(C.CONSUME_MESSAGE_DIRECTLY, directly)
            await create_topic(admin, addr, "RL", 1)
            sent = await send(admin, addr, "RL", b"direct", queue_id=0)
            await heartbeat(consumer, addr, "9.9.9.9@1", "CGRL", {"RL": "*"})
            ext = {"consumerGroup": "CGRL", "clientId": "9.9.9.9@1", "jstackEnable": "false"}
            r = await admin.invoke(addr, rq(C.GET_CONSUMER_RUNNING_INFO, ext))
            assert r.code == ResponseCode.SUCCESS and r.body_bytes == b'{"mqTable":{}}'
            ext = {"consumerGroup": "CGRL", "clientId": "9.9.9.9@1", "msgId": sent.ext_fields["msgId"]}
            r = await admin.invoke(addr, rq(C.CONSUME_MESSAGE_DIRECTLY, ext))
            assert r.code == ResponseCode.SUCCESS and r.body_bytes == b'{"got":1}'
            ext = {**ext, "clientId": "nobody"}
            r = await admin.invoke(addr, rq(C.CONSUME_MESSAGE_DIRECTLY, ext))
            assert r.code == ResponseCode.SYSTEM_ERROR and "not online" in r.remark
            p = await pull(admin, addr, "CGRL", "RL", 0, 0)
            assert p.code == ResponseCode.SUCCESS

    run(go())


def test_reply_message_pushed_to_requester(cluster):
    addr = cluster.addr

    async def go():
        pushed = []
        async with RemotingClient() as requester, RemotingClient() as responder:

            def on_push(ch, req):
                pushed.append(req)
                return req.response(ResponseCode.SUCCESS)

            requester.register_processor(C.PUSH_REPLY_MESSAGE_TO_CLIENT, on_push)
            hb = {"clientID": "req@1", "consumerDataSet": [], "producerDataSet": [{"groupName": "REQPG"}]}
            assert (await requester.invoke(addr, rq(C.HEART_BEAT, {}, orjson.dumps(hb)))).code == 0
            reply_topic = "DefaultCluster_REPLY_TOPIC"
            props = {"REPLY_TO_CLIENT": "req@1", "CORRELATION_ID": "corr-1", "MSG_TYPE": "reply"}
            ext = send_ext(reply_topic, props, 0)
            r = await responder.invoke(addr, rq(C.SEND_REPLY_MESSAGE_V2, ext, b"the answer"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert len(pushed) == 1
            p = pushed[0]
            assert p.body_bytes == b"the answer"
            assert "CORRELATION_ID\x01corr-1" in p.ext_fields["properties"]
            assert "PUSH_REPLY_TIME" in p.ext_fields["properties"]
            assert p.ext_fields["storeHost"] == addr
            props["REPLY_TO_CLIENT"] = "gone@1"
            r = await responder.invoke(
                addr, rq(C.SEND_REPLY_MESSAGE_V2, send_ext(reply_topic, props, 0), b"x")
            )
            assert r.code == ResponseCode.SYSTEM_ERROR and "not found" in r.remark

    run(go())


def test_update_broker_config_at_runtime(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "CFG", 1)
            r = await c.invoke(addr, rq(C.UPDATE_BROKER_CONFIG, {}, b"maxMessageSize=1024\n"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            try:
                assert (
                    await send(c, addr, "CFG", b"x" * 2000, queue_id=0)
                ).code == ResponseCode.MESSAGE_ILLEGAL
                r = await c.invoke(addr, rq(C.GET_BROKER_CONFIG, {}))
                assert "maxMessageSize=1024" in r.body_bytes.decode().splitlines()
                assert orjson.loads(r.ext_fields["version"])["counter"] == 1
                # not changeable at runtime / unknown / malformed: refused, nothing applied
                for body in (b"brokerName=other\n", b"noSuchKey=1\n", b"maxMessageSize=big\n"):
                    r = await c.invoke(addr, rq(C.UPDATE_BROKER_CONFIG, {}, body))
                    assert r.code == ResponseCode.SYSTEM_ERROR, body
            finally:
                r = await c.invoke(addr, rq(C.UPDATE_BROKER_CONFIG, {}, b"maxMessageSize=262144\n"))
                assert r.code == ResponseCode.SUCCESS
            assert (await send(c, addr, "CFG", b"x" * 2000, queue_id=0)).code == ResponseCode.SUCCESS
            # auto-create switched on at runtime: TBW102 appears and new topics are created on send
            assert (await send(c, addr, "AUTO1", b"x")).code == ResponseCode.TOPIC_NOT_EXIST
            r = await c.invoke(addr, rq(C.UPDATE_BROKER_CONFIG, {}, b"autoCreateTopicEnable=true\n"))
            assert r.code == ResponseCode.SUCCESS
            try:
                assert (await send(c, addr, "AUTO1", b"x")).code == ResponseCode.SUCCESS
            finally:
                await c.invoke(addr, rq(C.UPDATE_BROKER_CONFIG, {}, b"autoCreateTopicEnable=false\n"))
            assert (await send(c, addr, "AUTO2", b"x")).code == ResponseCode.TOPIC_NOT_EXIST

    run(go())
