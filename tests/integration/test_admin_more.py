"""The other mqadmin commands (topicClusterList, updateTopicPerm, deleteSubGroup, producerConnection,
getBrokerConfig, update/deleteKvConfig, queryMsgByUniqueKey) and AdminClient helpers, on a real standalone."""

from __future__ import annotations

import json
import re

from tests.interop.standalone import (
    Standalone,
    admin_fixture,
    mqadmin,
    mqadmin_ok,
    rows,
    standalone_fixture,
    unique,
)

from rocketq import Message, Producer
from rocketq.admin import MQAdminExt

CLUSTER = "DefaultCluster"


sa = standalone_fixture("admin-more")
admin = admin_fixture()


def test_topic_cluster_list_and_perm(sa: Standalone) -> None:
    topic = unique("PermT")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2")
    assert mqadmin_ok(sa.namesrv, "topicClusterList", "-t", topic).split() == [CLUSTER]
    out = mqadmin_ok(sa.namesrv, "updateTopicPerm", "-c", CLUSTER, "-t", topic, "-p", "4")
    assert f"update topic perm from 6 to 4 in {sa.broker} success." in out
    route = json.loads(mqadmin_ok(sa.namesrv, "topicRoute", "-t", topic))
    assert route["queueDatas"][0]["perm"] == 4
    assert route["queueDatas"][0]["writeQueueNums"] == 2  # queue counts kept
    # read-only now: sending is refused with a clear error
    code, _ = mqadmin(sa.namesrv, "sendMessage", "-t", topic, "-p", "x")
    assert code == 1
    mqadmin_ok(sa.namesrv, "updateTopicPerm", "-b", sa.broker, "-t", topic, "-p", "6")
    assert mqadmin(sa.namesrv, "sendMessage", "-t", topic, "-p", "x")[0] == 0


def test_sub_group_create_and_delete(sa: Standalone, admin: MQAdminExt) -> None:
    group = unique("SubG")
    mqadmin_ok(sa.namesrv, "updateSubGroup", "-b", sa.broker, "-g", group, "-r", "5", "-d", "true")
    cfg = admin.subscription_groups(sa.broker)[group]
    assert (cfg["retryMaxTimes"], cfg["consumeBroadcastEnable"]) == (5, True)
    out = mqadmin_ok(sa.namesrv, "deleteSubGroup", "-c", CLUSTER, "-g", group)
    assert f"delete subscription group [{group}] from broker [{sa.broker}] success." in out
    assert group not in admin.subscription_groups(sa.broker)


def test_producer_connection_and_unique_key(sa: Standalone, admin: MQAdminExt) -> None:
    topic, pgroup = unique("ProdT"), unique("ProdG")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    with Producer(pgroup, namesrv=sa.namesrv) as p:
        r = p.send(Message(topic, b"unique body", tags="TagU"))
        conns = rows(mqadmin_ok(sa.namesrv, "producerConnection", "-g", pgroup, "-t", topic))
        assert len(conns) == 1 and conns[0]["ClientId"]
    found = mqadmin_ok(sa.namesrv, "queryMsgByUniqueKey", "-i", r.msg_id, "-t", topic)
    assert "unique body" in found and r.offset_msg_id in found
    assert mqadmin(sa.namesrv, "queryMsgByUniqueKey", "-i", "0" * 32, "-t", topic)[0] == 1

    # AdminClient.resend_message: the same body again, as a new message of the topic
    again = admin.resend_message(r.offset_msg_id)
    assert again.offset_msg_id != r.offset_msg_id
    assert admin.view_message(again.offset_msg_id).body == b"unique body"
    assert admin.topic_consumer_groups(topic) == []


def test_broker_config_and_kv(sa: Standalone, admin: MQAdminExt) -> None:
    out = mqadmin_ok(sa.namesrv, "getBrokerConfig", "-b", sa.broker)
    assert "brokerClusterName" in out and CLUSTER in out
    assert "brokerName" in admin.broker_config(sa.broker)
    # each store size once, under RocketMQ 4.x's current name, with the size in effect (SMALL_STORE_CONF)
    listed = re.findall(r"^(\w+FileSize\w+)\s*=\s*(\d+)", out, re.M)
    assert dict(listed)["mappedFileSizeCommitLog"] == str(64 * 1024 * 1024)
    assert len(listed) == 2 and "mapedFileSizeCommitLog" not in out
    mqadmin_ok(sa.namesrv, "updateKvConfig", "-s", "NS_TEST", "-k", "k1", "-v", "v1")
    assert admin.get_kv_config("NS_TEST", "k1") == "v1"
    mqadmin_ok(sa.namesrv, "deleteKvConfig", "-s", "NS_TEST", "-k", "k1")
    assert admin.get_kv_config("NS_TEST", "k1") is None
    # the order conf written by updateTopic -o true lands in the same KV store
    topic = unique("OrderT")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2", "-o", "true")
    assert admin.get_kv_config("ORDER_TOPIC_CONFIG", topic).endswith(":2")
