"""aclEnable=true: every request that returns or copies a stored message is authorized by the topics the
stored record belongs to (issue 33, item 1), against a real broker with a real plain_acl.yml.

`mallory` and `eve` may not read topic Secret. Through each path below they tried to read (or copy into a
topic they can read) a Secret message, and each path used to hand it out: VIEW_MESSAGE_BY_ID, QUERY_MESSAGE
on a topic carrying other topics' messages, CONSUMER_SEND_MSG_BACK into their own %RETRY% / %DLQ% topic,
PULL of %RETRY% / SCHEDULE_TOPIC_XXXX / RMQ_SYS_TRANS_HALF_TOPIC, CONSUME_MESSAGE_DIRECTLY, END_TRANSACTION
and the transaction check-back. `owner` (and the admin) still can: each refusal is the check at work.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from tests.integration.broker_support import (
    call,
    create_topic,
    pull,
    records,
    run,
    send,
    send_ext,
    start_cluster,
)

from rocketq.client.acl import AclClientRPCHook
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

C = RequestCode
OK = ResponseCode.SUCCESS
DENIED = ResponseCode.NO_PERMISSION
rq = RemotingCommand.request

ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: admin
    secretKey: "adminsecret"
    admin: true
  - accessKey: owner
    secretKey: "ownersecret"
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["Secret=PUB|SUB", "Open=PUB|SUB", "DefaultCluster_REPLY_TOPIC=SUB"]
    groupPerms: ["SharedG=SUB", "OwnerG=SUB"]
  - accessKey: mallory
    secretKey: "mallorysecret"
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["Secret=DENY", "Open=PUB|SUB", "%DLQ%MalG=SUB"]
    groupPerms: ["MalG=SUB", "SharedG=SUB"]
  - accessKey: eve
    secretKey: "evesecret"
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: ["Secret=DENY"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("acl-reads")
    (home / "broker" / "conf").mkdir(parents=True)
    (home / "broker" / "conf" / "plain_acl.yml").write_text(ACL_YML)
    c = start_cluster(
        home,
        aclEnable="true",
        messageDelayLevel="1s 1s 1s",
        transactionTimeOut="300",
        transactionCheckInterval="200",
    )
    yield c
    c.stop()


def client(ak: str) -> RemotingClient:
    return RemotingClient(rpc_hook=AclClientRPCHook(ak, f"{ak}secret"))


def phys_of(sent: RemotingCommand) -> int:
    return int(sent.ext_fields["msgId"][16:], 16)


def query_ext(topic: str, key: str) -> dict[str, str]:
    now = int(time.time() * 1000)
    return {
        "topic": topic,
        "key": key,
        "maxNum": "32",
        "beginTimestamp": "0",
        "endTimestamp": str(now + 60_000),
    }


def send_back_ext(group: str, phys: int, delay_level: int) -> dict[str, str]:
    return {"group": group, "offset": str(phys), "delayLevel": str(delay_level), "originMsgId": "",
            "originTopic": "Open", "unitMode": "false", "maxReconsumeTimes": "16"}  # fmt: skip


def heartbeat_body(
    client_id: str, consumer_group: str | None, producer_group: str | None, topic: str
) -> bytes:
    consumers = []
    if consumer_group:
        sub = {"topic": topic, "subString": "*", "classFilterMode": False, "tagsSet": [], "codeSet": [],
               "subVersion": 1, "expressionType": "TAG"}  # fmt: skip
        consumers.append({
            "groupName": consumer_group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False, "subscriptionDataSet": [sub],
        })  # fmt: skip
    producers = [{"groupName": producer_group}] if producer_group else []
    return orjson.dumps({"clientID": client_id, "consumerDataSet": consumers, "producerDataSet": producers})


async def wait_max_offset(admin: RemotingClient, addr: str, topic: str, at_least: int, qid: int = 0) -> None:
    deadline = time.monotonic() + 20
    while True:
        r = await admin.invoke(addr, rq(C.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)}))
        if r.code == OK and int(r.ext_fields["offset"]) >= at_least:
            return
        assert time.monotonic() < deadline, f"{topic}/{qid} never reached offset {at_least}"
        await asyncio.sleep(0.1)


def test_reads_by_offset_key_and_carrier_topics_are_authorized_by_the_stored_topic(cluster):
    addr = cluster.addr

    async def go():
        async with (
            client("admin") as admin,
            client("owner") as owner,
            client("mallory") as mallory,
            client("eve") as eve,
        ):
            if True:
                for t in ("Secret", "Open"):
                    assert (await create_topic(admin, addr, t, 1)).code == OK
                for who, c, group in (
                    (mallory, "m", "MalG"),
                    (mallory, "m", "SharedG"),
                    (owner, "o", "SharedG"),
                ):
                    r = await who.invoke(addr, rq(C.HEART_BEAT, {}, heartbeat_body(c, group, None, "Open")))
                    assert r.code == OK, r.remark
                secret = await send(owner, addr, "Secret", b"top secret", {"KEYS": "k-secret"}, queue_id=0)
                opened = await send(owner, addr, "Open", b"public", {"KEYS": "k-open"}, queue_id=0)
                assert secret.code == opened.code == OK
                s_phys, o_phys = phys_of(secret), phys_of(opened)

                # VIEW_MESSAGE_BY_ID names no topic: the stored one decides
                view = {"offset": str(s_phys)}
                r = await mallory.invoke(addr, rq(C.VIEW_MESSAGE_BY_ID, view))
                assert r.code == DENIED and "Secret" in r.remark and not r.body_bytes
                r = await eve.invoke(addr, rq(C.VIEW_MESSAGE_BY_ID, view))
                assert r.code == DENIED
                r = await owner.invoke(addr, rq(C.VIEW_MESSAGE_BY_ID, view))
                assert r.code == OK and bytes(records(r)[0].body) == b"top secret"
                r = await mallory.invoke(addr, rq(C.VIEW_MESSAGE_BY_ID, {"offset": str(o_phys)}))
                assert r.code == OK and bytes(records(r)[0].body) == b"public"

                # QUERY_MESSAGE by key on the topic itself: the hook refuses the header topic
                r = await mallory.invoke(addr, rq(C.QUERY_MESSAGE, query_ext("Secret", "k-secret")))
                assert r.code != OK and "Secret" in r.remark

                # CONSUMER_SEND_MSG_BACK of a Secret offset into the caller's own retry / dead-letter topic
                for level in (1, -1):
                    r = await mallory.invoke(
                        addr, rq(C.CONSUMER_SEND_MSG_BACK, send_back_ext("MalG", s_phys, level))
                    )
                    assert r.code == DENIED and "Secret" in r.remark, r.remark
                r = await mallory.invoke(
                    addr, rq(C.CONSUMER_SEND_MSG_BACK, send_back_ext("MalG", o_phys, -1))
                )
                assert r.code == OK, r.remark  # its own readable message still goes to its DLQ
                p = await pull(mallory, addr, "MalG", "%DLQ%MalG", 0, 0)
                assert p.code == OK and [bytes(m.body) for m in records(p)] == [b"public"]

                # a retry topic shared by two accounts: the owner's retry of a Secret message stays the
                # owner's; mallory reads up to it (its own Open retry) and is refused at it
                r = await mallory.invoke(
                    addr, rq(C.CONSUMER_SEND_MSG_BACK, send_back_ext("SharedG", o_phys, 1))
                )
                assert r.code == OK
                await wait_max_offset(admin, addr, "%RETRY%SharedG", 1)
                r = await owner.invoke(
                    addr, rq(C.CONSUMER_SEND_MSG_BACK, send_back_ext("SharedG", s_phys, 1))
                )
                assert r.code == OK
                await wait_max_offset(admin, addr, "%RETRY%SharedG", 2)
                p = await pull(mallory, addr, "SharedG", "%RETRY%SharedG", 0, 0)
                assert p.code == OK and [bytes(m.body) for m in records(p)] == [b"public"]
                assert p.ext_fields["nextBeginOffset"] == "1"
                p = await pull(mallory, addr, "SharedG", "%RETRY%SharedG", 0, 1)
                assert p.code == DENIED and "Secret" in p.remark and not p.body_bytes
                p = await pull(owner, addr, "SharedG", "%RETRY%SharedG", 0, 0)
                assert [bytes(m.body) for m in records(p)] == [b"public", b"top secret"]

                # QUERY by key or UNIQ_KEY on the retry topic (its index carries the original keys)
                r = await mallory.invoke(addr, rq(C.QUERY_MESSAGE, query_ext("%RETRY%SharedG", "k-secret")))
                assert r.code == DENIED and not r.body_bytes, r.remark
                r = await owner.invoke(addr, rq(C.QUERY_MESSAGE, query_ext("%RETRY%SharedG", "k-secret")))
                assert r.code == OK and bytes(records(r)[0].body) == b"top secret"

                # SCHEDULE_TOPIC_XXXX holds delayed messages of every topic (eve may read it by default)
                delayed = await send(
                    owner, addr, "Secret", b"later", {"DELAY": "3", "KEYS": "k-d"}, queue_id=0
                )
                assert delayed.code == OK
                p = await pull(eve, addr, "EveG", "SCHEDULE_TOPIC_XXXX", 2, 0)
                assert p.code == DENIED and "Secret" in p.remark, (p.code, p.remark)
                r = await eve.invoke(addr, rq(C.QUERY_MESSAGE, query_ext("SCHEDULE_TOPIC_XXXX", "k-d")))
                assert r.code != OK and not r.body_bytes
                p = await pull(admin, addr, "EveG", "SCHEDULE_TOPIC_XXXX", 2, 0)
                assert p.code == OK and b"later" in [bytes(m.body) for m in records(p)]

    run(go())


def test_consume_directly_end_transaction_and_check_back_need_the_stored_topic(cluster):
    addr = cluster.addr

    async def go():
        pushed: dict[str, list[bytes]] = {"eve": [], "owner": []}
        checks: dict[str, list[bytes]] = {"eve": [], "owner": []}

        def on_push(who):
            def handler(ch, req):
                pushed[who].append(req.body_bytes)
                return req.response(OK, None, None, orjson.dumps({"consumeResult": "CR_SUCCESS"}))

            return handler

        def on_check(who):
            def handler(ch, req):
                checks[who].append(req.body_bytes)

            return handler

        async with client("admin") as admin, client("owner") as owner, client("eve") as eve:
            for name, c in (("eve", eve), ("owner", owner)):
                c.register_processor(C.CONSUME_MESSAGE_DIRECTLY, on_push(name))
                c.register_processor(C.CHECK_TRANSACTION_STATE, on_check(name))
            for t in ("Secret", "Open"):
                await create_topic(admin, addr, t, 1)
            secret = await send(owner, addr, "Secret", b"direct secret", queue_id=0)
            assert secret.code == OK

            # CONSUME_MESSAGE_DIRECTLY: the caller names a group, a client and an offset message id
            r = await eve.invoke(addr, rq(C.HEART_BEAT, {}, heartbeat_body("eve-1", "EveG", None, "Open")))
            assert r.code == OK
            direct = {"consumerGroup": "EveG", "clientId": "eve-1", "msgId": secret.ext_fields["msgId"]}
            r = await eve.invoke(addr, rq(C.CONSUME_MESSAGE_DIRECTLY, direct))
            assert r.code == DENIED and pushed["eve"] == [], r.remark
            r = await owner.invoke(
                addr, rq(C.HEART_BEAT, {}, heartbeat_body("owner-1", "OwnerG", None, "Secret"))
            )
            assert r.code == OK
            direct = {"consumerGroup": "OwnerG", "clientId": "owner-1", "msgId": secret.ext_fields["msgId"]}
            r = await owner.invoke(addr, rq(C.CONSUME_MESSAGE_DIRECTLY, direct))
            assert r.code == OK and len(pushed["owner"]) == 1 and b"direct secret" in pushed["owner"][0]

            # a half message of Secret: eve may neither end it nor receive its check-back
            props = {"TRAN_MSG": "true", "PGROUP": "TXPG", "UNIQ_KEY": "U-acl"}
            half = await send(owner, addr, "Secret", b"half secret", props, queue_id=0, group="TXPG", f="4")
            assert half.code == OK
            p = await pull(eve, addr, "EveG", "RMQ_SYS_TRANS_HALF_TOPIC", 0, 0)
            assert p.code == DENIED, (p.code, p.remark)
            end = {"producerGroup": "TXPG", "tranStateTableOffset": half.ext_fields["queueOffset"],
                   "commitLogOffset": str(phys_of(half)), "commitOrRollback": "8",
                   "fromTransactionCheck": "false", "msgId": "U-acl", "transactionId": "U-acl"}  # fmt: skip
            r = await eve.invoke(addr, rq(C.END_TRANSACTION, end))
            assert r.code == DENIED and "Secret" in r.remark, r.remark
            r = await eve.invoke(addr, rq(C.HEART_BEAT, {}, heartbeat_body("eve-2", None, "TXPG", "Open")))
            assert r.code == OK
            await asyncio.sleep(1.5)  # several check rounds: the only producer online may not be asked
            assert checks["eve"] == []
            r = await owner.invoke(
                addr, rq(C.HEART_BEAT, {}, heartbeat_body("owner-2", None, "TXPG", "Secret"))
            )
            assert r.code == OK
            deadline = time.monotonic() + 20
            while not checks["owner"]:
                assert time.monotonic() < deadline, "the owner was never asked about its half message"
                await asyncio.sleep(0.1)
            assert b"half secret" in checks["owner"][0] and checks["eve"] == []

    run(go())


def test_a_reply_goes_only_to_a_requester_that_may_read_the_reply_topic(cluster):
    """A client id is whatever a heartbeat claims: mallory claiming the requester's id gets no reply."""
    addr = cluster.addr

    async def go():
        pushed: dict[str, list[bytes]] = {"mallory": [], "owner": []}
        async with client("admin") as responder, client("owner") as owner, client("mallory") as mallory:
            for name, c in (("mallory", mallory), ("owner", owner)):
                c.register_processor(
                    C.PUSH_REPLY_MESSAGE_TO_CLIENT,
                    lambda ch, req, name=name: pushed[name].append(req.body_bytes) or req.response(OK),
                )
            hb = heartbeat_body("req@1", None, "REQPG", "Open")
            assert (await mallory.invoke(addr, rq(C.HEART_BEAT, {}, hb))).code == OK
            props = {"REPLY_TO_CLIENT": "req@1", "CORRELATION_ID": "corr-1", "MSG_TYPE": "reply"}
            reply = rq(
                C.SEND_REPLY_MESSAGE_V2, send_ext("DefaultCluster_REPLY_TOPIC", props, 0), b"the answer"
            )
            r = await responder.invoke(addr, reply)
            assert r.code != OK and pushed["mallory"] == []
            assert (await owner.invoke(addr, rq(C.HEART_BEAT, {}, hb))).code == OK
            reply = rq(
                C.SEND_REPLY_MESSAGE_V2, send_ext("DefaultCluster_REPLY_TOPIC", props, 0), b"the answer"
            )
            r = await responder.invoke(addr, reply)
            assert r.code == OK, r.remark
            assert pushed == {"mallory": [], "owner": [b"the answer"]}

    run(go())


def test_offset_and_group_reads_need_sub_like_rocketmq5(cluster):
    """GET_MAX_OFFSET & co. name a topic, GET_CONSUMER_LIST_BY_GROUP & co. a group: RocketMQ 5 authorizes
    them (GET); plain ACL's SUB stands for it."""
    addr = cluster.addr

    async def go():
        async with client("admin") as admin, client("mallory") as mallory:
            await create_topic(admin, addr, "Secret", 1)
            r = await mallory.invoke(addr, rq(C.GET_MAX_OFFSET, {"topic": "Secret", "queueId": "0"}))
            assert r.code != OK and "Secret" in r.remark
            r = await mallory.invoke(addr, rq(C.GET_MAX_OFFSET, {"topic": "Open", "queueId": "0"}))
            assert r.code == OK
            r = await mallory.invoke(addr, rq(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "OwnerG"}))
            assert r.code != OK and "OwnerG" in r.remark
            mq = {"topic": "Open", "brokerName": "broker-t", "queueId": 0}
            lock = orjson.dumps({"consumerGroup": "OwnerG", "clientId": "x", "mqSet": [mq]})
            r = await mallory.invoke(addr, rq(C.LOCK_BATCH_MQ, {}, lock))
            assert r.code != OK and "OwnerG" in r.remark
            r = await call(addr, C.GET_MAX_OFFSET, {"topic": "Open", "queueId": "0"})  # unsigned
            assert r.code != OK

    run(go())
