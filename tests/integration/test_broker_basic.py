"""Broker end to end over the wire with a raw RemotingClient: send, pull, offsets, queries, long polling."""

from __future__ import annotations

import asyncio
import time

import orjson
from tests.integration.broker_support import (
    call,
    cluster_fixture,
    create_topic,
    heartbeat,
    pull,
    pull_ext,
    records,
    run,
    send,
    send_ext,
)

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.record import encode_batch
from rocketq.remoting import RemotingClient

C = RequestCode
rq = RemotingCommand.request


cluster = cluster_fixture("broker-basic", enablePropertyFilter="true")


def test_send_pull_round_trip(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            assert (await create_topic(c, addr, "RT", 2)).code == ResponseCode.SUCCESS
            r = await send(c, addr, "RT", b"hello", {"TAGS": "TagA", "KEYS": "k1 k2"}, queue_id=1)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.ext_fields["queueId"] == "1"
            assert r.ext_fields["queueOffset"] == "0"
            assert len(r.ext_fields["msgId"]) == 32
            assert r.ext_fields["MSG_REGION"] == "DefaultRegion"
            assert r.ext_fields["TRACE_ON"] in ("true", "false")
            r2 = await send(c, addr, "RT", b"world", {"TAGS": "TagB"}, queue_id=1)
            assert r2.ext_fields["queueOffset"] == "1"
            p = await pull(c, addr, "CG1", "RT", 1, 0)
            assert p.code == ResponseCode.SUCCESS, p.remark
            assert p.ext_fields["nextBeginOffset"] == "2"
            assert p.ext_fields["minOffset"] == "0" and p.ext_fields["maxOffset"] == "2"
            assert p.ext_fields["suggestWhichBrokerId"] == "0"
            msgs = records(p)
            assert [bytes(m.body) for m in msgs] == [b"hello", b"world"]
            m = msgs[0]
            assert m.topic == "RT" and m.queue_id == 1 and m.queue_offset == 0
            assert m.properties["TAGS"] == "TagA" and m.properties["KEYS"] == "k1 k2"
            assert m.properties["CLUSTER"] == "DefaultCluster"
            assert m.offset_msg_id == r.ext_fields["msgId"]
            # tag filtering on the broker (hash in the consume queue)
            p = await pull(c, addr, "CG1", "RT", 1, 0, sub="TagB")
            assert p.code == ResponseCode.SUCCESS
            assert [bytes(x.body) for x in records(p)] == [b"world"]
            # broker picks the queue
            r3 = await send(c, addr, "RT", b"any")
            assert r3.code == ResponseCode.SUCCESS and r3.ext_fields["queueId"] in ("0", "1")

    run(go())


def test_send_v1_and_batch(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "V1B", 1)
            v2 = send_ext("V1B", {"TAGS": "x"}, 0)
            v1 = {
                "producerGroup": v2["a"],
                "topic": v2["b"],
                "defaultTopic": v2["c"],
                "defaultTopicQueueNums": v2["d"],
                "queueId": v2["e"],
                "sysFlag": v2["f"],
                "bornTimestamp": v2["g"],
                "flag": v2["h"],
                "properties": v2["i"],
                "reconsumeTimes": "0",
                "unitMode": "false",
            }
            r = await c.invoke(addr, rq(C.SEND_MESSAGE, v1, b"v1"), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
            body = encode_batch([(b"b%d" % i, 0, {"UNIQ_KEY": f"U{i}", "KEYS": f"bk{i}"}) for i in range(5)])
            ext = send_ext("V1B", {}, 0, m="true")
            r = await c.invoke(addr, rq(C.SEND_BATCH_MESSAGE, ext, body), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.ext_fields["queueOffset"] == "1"
            assert len(r.ext_fields["msgId"].split(",")) == 5
            p = await pull(c, addr, "CGB", "V1B", 0, 0)
            msgs = records(p)
            assert [bytes(m.body) for m in msgs] == [b"v1", b"b0", b"b1", b"b2", b"b3", b"b4"]
            assert [m.queue_offset for m in msgs] == list(range(6))
            assert msgs[3].properties["UNIQ_KEY"] == "U2"
            assert msgs[3].properties["CLUSTER"] == "DefaultCluster"

    run(go())


def test_long_polling_wakes_and_times_out(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c, RemotingClient() as producer:
            await create_topic(c, addr, "LP", 1)
            t0 = time.monotonic()
            p = await pull(c, addr, "CGLP", "LP", 0, 0, sys_flag=6, suspend_ms=700)
            waited = time.monotonic() - t0
            assert p.code == ResponseCode.PULL_NOT_FOUND
            assert 0.6 <= waited < 5.0

            async def later():
                await asyncio.sleep(0.5)
                return await send(producer, addr, "LP", b"wake", queue_id=0)

            t0 = time.monotonic()
            held = asyncio.ensure_future(
                pull(c, addr, "CGLP", "LP", 0, 0, timeout=20, sys_flag=6, suspend_ms=15000)
            )
            # a held pull must not block other requests on the same connection
            await asyncio.sleep(0.1)
            r = await c.invoke(addr, rq(C.GET_MAX_OFFSET, {"topic": "LP", "queueId": "0"}))
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"
            sent = await later()
            assert sent.code == ResponseCode.SUCCESS
            p = await held
            waited = time.monotonic() - t0
            assert p.code == ResponseCode.SUCCESS
            assert [bytes(m.body) for m in records(p)] == [b"wake"]
            assert waited < 5.0  # woken by the arrival, long before the 15 s suspend timeout

    run(go())


def test_pull_offset_semantics(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "PO", 1)
            p = await pull(c, addr, "CGPO", "PO", 0, 0)
            assert p.code == ResponseCode.PULL_NOT_FOUND and p.ext_fields["nextBeginOffset"] == "0"
            p = await pull(c, addr, "CGPO", "PO", 0, 5)
            assert p.code == ResponseCode.PULL_OFFSET_MOVED and p.ext_fields["nextBeginOffset"] == "0"
            for i in range(3):
                await send(c, addr, "PO", b"m%d" % i, queue_id=0)
            p = await pull(c, addr, "CGPO", "PO", 0, 3)
            assert p.code == ResponseCode.PULL_NOT_FOUND and p.ext_fields["nextBeginOffset"] == "3"
            p = await pull(c, addr, "CGPO", "PO", 0, 10**12)
            assert p.code == ResponseCode.PULL_OFFSET_MOVED and p.ext_fields["nextBeginOffset"] == "3"
            p = await pull(c, addr, "CGPO", "PO", 0, -5)
            assert p.code == ResponseCode.PULL_OFFSET_MOVED and p.ext_fields["nextBeginOffset"] == "0"
            p = await pull(c, addr, "CGPO", "PO", 0, 1, max_nums=1)
            assert p.code == ResponseCode.SUCCESS and p.ext_fields["nextBeginOffset"] == "2"
            p = await pull(c, addr, "CGPO", "PO", 7, 0)
            assert p.code == ResponseCode.SYSTEM_ERROR
            p = await pull(c, addr, "CGPO", "NoSuchTopic", 0, 0)
            assert p.code == ResponseCode.TOPIC_NOT_EXIST
            # without the SUBSCRIPTION flag the heartbeat's subscription is used
            p = await pull(c, addr, "CGPO-nohb", "PO", 0, 0, sys_flag=0)
            assert p.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            hb = await heartbeat(c, addr, "127.0.0.1@hb", "CGPO-hb", {"PO": "*"})
            assert hb.code == ResponseCode.SUCCESS
            p = await pull(c, addr, "CGPO-hb", "PO", 0, 0, sys_flag=0)
            assert p.code == ResponseCode.SUCCESS and len(records(p)) == 3

    run(go())


def test_consumer_offsets(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "OFS", 2)
            q = {"consumerGroup": "CGO", "topic": "OFS", "queueId": "0"}
            r = await c.invoke(addr, rq(C.QUERY_CONSUMER_OFFSET, dict(q)))
            # nothing committed and the queue still holds message 0 -> 0 (RocketMQ behaviour)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"
            u = {**q, "commitOffset": "7"}
            r = await c.invoke(addr, rq(C.UPDATE_CONSUMER_OFFSET, u))
            assert r.code == ResponseCode.SUCCESS
            r = await c.invoke(addr, rq(C.QUERY_CONSUMER_OFFSET, dict(q)))
            assert r.ext_fields["offset"] == "7"
            # ali-ons sends -1 for "no offset": never overwrites
            u = {**q, "commitOffset": "-1"}
            await c.invoke(addr, rq(C.UPDATE_CONSUMER_OFFSET, u))
            r = await c.invoke(addr, rq(C.QUERY_CONSUMER_OFFSET, dict(q)))
            assert r.ext_fields["offset"] == "7"
            # COMMIT_OFFSET flag on a pull stores the commit offset
            await send(c, addr, "OFS", b"x", queue_id=1)
            await pull(c, addr, "CGO", "OFS", 1, 0, sys_flag=5, commit_offset=1)
            q1 = {**q, "queueId": "1"}
            r = await c.invoke(addr, rq(C.QUERY_CONSUMER_OFFSET, q1))
            assert r.ext_fields["offset"] == "1"

    run(go())


def test_search_view_query(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "SQ", 1)
            r0 = await send(
                c, addr, "SQ", b"first", {"KEYS": "order-1", "UNIQ_KEY": "AC1100FF0001"}, queue_id=0
            )
            await asyncio.sleep(0.05)
            mid = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            await send(c, addr, "SQ", b"second", {"KEYS": "order-2"}, queue_id=0)
            qe = {"topic": "SQ", "queueId": "0"}
            r = await c.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**qe, "timestamp": str(mid)}
                ),
            )
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "1"
            r = await c.invoke(addr, rq(C.GET_MIN_OFFSET, dict(qe)))
            assert r.ext_fields["offset"] == "0"
            r = await c.invoke(addr, rq(C.GET_MAX_OFFSET, dict(qe)))
            assert r.ext_fields["offset"] == "2"
            r = await c.invoke(addr, rq(C.GET_EARLIEST_MSG_STORETIME, dict(qe)))
            assert 0 < int(r.ext_fields["timestamp"]) <= mid
            # view by offsetMsgId's commit log offset
            phys = int(r0.ext_fields["msgId"][16:], 16)
            v = await c.invoke(addr, rq(C.VIEW_MESSAGE_BY_ID, {"offset": str(phys)}))
            assert v.code == ResponseCode.SUCCESS
            assert bytes(records(v)[0].body) == b"first"
            v = await c.invoke(addr, rq(C.VIEW_MESSAGE_BY_ID, {"offset": str(10**12)}))
            assert v.code == ResponseCode.SYSTEM_ERROR
            now = int(time.time() * 1000)
            qm = {
                "topic": "SQ",
                "key": "order-2",
                "maxNum": "32",
                "beginTimestamp": "0",
                "endTimestamp": str(now + 1000),
            }
            for _ in range(60):  # the index is built asynchronously, as in RocketMQ
                r = await c.invoke(addr, rq(C.QUERY_MESSAGE, qm))
                if r.code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.05)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert [bytes(m.body) for m in records(r)] == [b"second"]
            assert "indexLastUpdateTimestamp" in r.ext_fields
            qm = {**qm, "key": "AC1100FF0001", "_UNIQUE_KEY_QUERY": "true"}
            r = await c.invoke(addr, rq(C.QUERY_MESSAGE, qm))
            assert r.code == ResponseCode.SUCCESS and bytes(records(r)[0].body) == b"first"
            qm = {**qm, "key": "nope", "_UNIQUE_KEY_QUERY": "false"}
            r = await c.invoke(addr, rq(C.QUERY_MESSAGE, qm))
            assert r.code == ResponseCode.QUERY_NOT_FOUND

    run(go())


def test_heartbeat_consumer_list_and_notify(cluster):
    addr = cluster.addr

    async def go():
        notified: list[str] = []
        async with RemotingClient() as c1, RemotingClient() as c2:

            def on_notify(ch, req):
                notified.append(req.ext_fields.get("consumerGroup"))

            c1.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
            await create_topic(c1, addr, "HB", 1)
            assert (await heartbeat(c1, addr, "10.0.0.1@1", "CGHB", {"HB": "*"})).code == 0
            lst = await c1.invoke(
                addr,
                rq(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CGHB"}),
            )
            assert orjson.loads(lst.body_bytes)["consumerIdList"] == ["10.0.0.1@1"]
            await heartbeat(c2, addr, "10.0.0.2@2", "CGHB", {"HB": "*"})
            for _ in range(50):
                if notified:
                    break
                await asyncio.sleep(0.05)
            assert "CGHB" in notified
            lst = await c1.invoke(
                addr,
                rq(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CGHB"}),
            )
            assert sorted(orjson.loads(lst.body_bytes)["consumerIdList"]) == ["10.0.0.1@1", "10.0.0.2@2"]
            # the retry topic was created for the group
            ts = await c1.invoke(addr, rq(C.GET_ALL_TOPIC_CONFIG, {}))
            assert "%RETRY%CGHB" in orjson.loads(ts.body_bytes)["topicConfigTable"]
            notified.clear()
            un = {"clientID": "10.0.0.2@2", "consumerGroup": "CGHB"}
            r = await c2.invoke(addr, rq(C.UNREGISTER_CLIENT, un))
            assert r.code == 0
            for _ in range(50):
                if notified:
                    break
                await asyncio.sleep(0.05)
            assert notified == ["CGHB"]
            lst = await c1.invoke(
                addr,
                rq(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CGHB"}),
            )
            assert orjson.loads(lst.body_bytes)["consumerIdList"] == ["10.0.0.1@1"]
        # all channels closed: the group is gone
        await asyncio.sleep(0.3)
        r = await call(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CGHB"})
        assert r.code == ResponseCode.SYSTEM_ERROR

    run(go())


def test_sql92_filtering(cluster):
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "SQL", 1)
            for i in range(1, 11):
                props = {"a": str(i), "TAGS": "even" if i % 2 == 0 else "odd"}
                assert (await send(c, addr, "SQL", b"m%d" % i, props, queue_id=0)).code == 0

            async def sql_pull(expr: str, offset: int = 0):
                ext = {**pull_ext("CGSQL", "SQL", 0, offset, sub=expr), "expressionType": "SQL92"}
                return await c.invoke(addr, rq(C.PULL_MESSAGE, ext))

            p = await sql_pull("a > 5 AND TAGS = 'even'")
            assert p.code == ResponseCode.SUCCESS
            assert [bytes(m.body) for m in records(p)] == [b"m6", b"m8", b"m10"]
            p = await sql_pull("a > 100")
            assert p.code == ResponseCode.PULL_RETRY_IMMEDIATELY
            assert p.ext_fields["nextBeginOffset"] == "10"
            p = await sql_pull("a >")
            assert p.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            body = {"subscriptionData": {"topic": "SQL", "subString": "a >", "expressionType": "SQL92"}}
            r = await c.invoke(addr, rq(C.CHECK_CLIENT_CONFIG, {}, orjson.dumps(body)))
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            body["subscriptionData"]["subString"] = "a BETWEEN 2 AND 3"
            r = await c.invoke(addr, rq(C.CHECK_CLIENT_CONFIG, {}, orjson.dumps(body)))
            assert r.code == ResponseCode.SUCCESS

    run(go())


def test_send_stores_client_property_string_like_the_dict_path(cluster):
    """Plain sends store the client's property string (+ CLUSTER) without a dict round trip: a Java-style
    trailing separator, a repeated key (the last wins) and the tag filter must behave as before, and a string
    that only fits once normalised is still accepted."""
    addr = cluster.addr

    async def go():
        async with RemotingClient() as c:
            await create_topic(c, addr, "RAWP", 1)
            raw = "TAGS\x01old\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02TAGS\x01TagZ\x02"
            ext = send_ext("RAWP", queue_id=0)
            r = await c.invoke(addr, rq(C.SEND_MESSAGE_V2, {**ext, "i": raw}, b"m"), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
            p = await pull(c, addr, "CGR", "RAWP", 0, 0, sub="TagZ")
            (m,) = records(p)
            want = {"TAGS": "TagZ", "KEYS": "k1 k2", "UNIQ_KEY": "U1", "CLUSTER": "DefaultCluster"}
            assert m.properties == want
            p = await pull(c, addr, "CGR", "RAWP", 0, 0, sub="old")
            assert p.code != ResponseCode.SUCCESS or records(p) == []
            # fits the 32,767 limit with CLUSTER only after the duplicate pairs are dropped (as before)
            dup = "\x02".join(["X\x01" + "v" * 998] * 32) + "\x02TAGS\x01t"
            dup += "\x02Y\x01" + "w" * (32760 - len(dup) - 3)
            assert len(dup) == 32760
            r = await c.invoke(addr, rq(C.SEND_MESSAGE_V2, {**ext, "i": dup}, b"d"), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark

    run(go())


def test_processes_write_rocketmq_style_logs(cluster):
    """namesrv.log under the NameServer's --home, broker.log beside the broker's store (RocketMQ's
    ~/logs/rocketmqlogs for its default ~/store): the boot lines and the broker's config are in them."""
    broker_log = cluster.home / "logs" / "rocketmqlogs" / "broker.log"  # cluster.home: the broker's
    namesrv_log = cluster.home.parent / "ns" / "logs" / "rocketmqlogs" / "namesrv.log"
    broker_text = broker_log.read_text()
    assert "The broker[broker-t, " in broker_text and "boot success" in broker_text
    assert "broker config brokerName=broker-t" in broker_text
    assert "The Name Server boot success" in namesrv_log.read_text()
    assert "The broker[" in cluster.broker.output  # the boot line is still on stdout
