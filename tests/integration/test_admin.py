"""mqadmin against a real `rocketq standalone` process (NameServer + broker on 127.0.0.1)."""

from __future__ import annotations

import json
import re
import time

import pytest
from tests.interop.standalone import (
    Standalone,
    admin_fixture,
    mqadmin,
    mqadmin_ok,
    rows,
    standalone_fixture,
    unique,
)

from rocketq.admin import MQAdminExt
from rocketq.admin.main import COMMANDS

CLUSTER = "DefaultCluster"


sa = standalone_fixture("admin")
admin = admin_fixture()


def broker_name(sa: Standalone) -> str:
    return rows(mqadmin_ok(sa.namesrv, "clusterList"))[0]["Broker Name"]


def test_help_for_every_command() -> None:
    from rocketq.admin.main import main

    for name in COMMANDS:
        assert main([name, "-h"]) == 0
    assert main([]) == 2
    assert main(["noSuchCommand", "-n", "127.0.0.1:1"]) == 2


def test_unreachable_namesrv_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers.procs import free_port

    code, _ = mqadmin(f"127.0.0.1:{free_port()}", "topicList")
    assert code == 1
    assert "NameServer unreachable" in capsys.readouterr().err


def test_cluster_list_and_broker_status(sa: Standalone) -> None:
    table = rows(mqadmin_ok(sa.namesrv, "clusterList"))
    assert len(table) == 1
    assert table[0]["Cluster Name"] == CLUSTER
    assert table[0]["BID"] == "0"
    assert table[0]["Addr"] == sa.broker
    status = mqadmin_ok(sa.namesrv, "brokerStatus", "-b", sa.broker)
    assert status.strip(), "brokerStatus printed nothing"
    assert " : " in status
    by_cluster = rows(mqadmin_ok(sa.namesrv, "brokerStatus", "-c", CLUSTER))
    assert {r["Broker Addr"] for r in by_cluster} == {sa.broker}
    assert "brokerVersionDesc" in {r["Key"] for r in by_cluster}
    more = rows(mqadmin_ok(sa.namesrv, "clusterList", "-m"))
    assert [(r["Cluster Name"], r["Broker Name"]) for r in more] == [(CLUSTER, table[0]["Broker Name"])]


def test_topic_lifecycle(sa: Standalone, capsys: pytest.CaptureFixture[str]) -> None:
    topic = unique("AdmTopic")
    out = mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "4", "-w", "4")
    assert f"create topic to {sa.broker} success." in out
    assert topic in mqadmin_ok(sa.namesrv, "topicList").split()

    route = json.loads(mqadmin_ok(sa.namesrv, "topicRoute", "-t", topic))
    (qd,) = route["queueDatas"]
    assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (4, 4, 6)
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == sa.broker

    status = rows(mqadmin_ok(sa.namesrv, "topicStatus", "-t", topic))
    assert sorted(int(r["QID"]) for r in status) == [0, 1, 2, 3]
    assert all(r["Min Offset"] == "0" and r["Max Offset"] == "0" for r in status)

    # update: fewer write queues, read-only perm
    mqadmin_ok(sa.namesrv, "updateTopic", "-b", sa.broker, "-t", topic, "-r", "4", "-w", "2", "-p", "4")
    route = json.loads(mqadmin_ok(sa.namesrv, "topicRoute", "-t", topic))
    assert (route["queueDatas"][0]["writeQueueNums"], route["queueDatas"][0]["perm"]) == (2, 4)

    listed = rows(mqadmin_ok(sa.namesrv, "topicList", "-c"))
    assert {"Cluster Name": CLUSTER, "Topic": topic, "Consumer Group": ""} in listed

    out = mqadmin_ok(sa.namesrv, "deleteTopic", "-c", CLUSTER, "-t", topic)
    assert "success" in out
    assert topic not in mqadmin_ok(sa.namesrv, "topicList").split()
    code, _ = mqadmin(sa.namesrv, "topicRoute", "-t", topic)
    assert code == 1
    assert "does not exist" in capsys.readouterr().err


def test_missing_topic_and_bad_names(sa: Standalone, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = mqadmin(sa.namesrv, "topicStatus", "-t", unique("Missing"))
    assert code == 1
    assert "does not exist" in capsys.readouterr().err
    code, _ = mqadmin(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", "bad topic!")
    assert code == 2
    code, _ = mqadmin(sa.namesrv, "updateTopic", "-c", "NoSuchCluster", "-t", unique("T"))
    assert code == 1
    assert "NoSuchCluster" in capsys.readouterr().err
    code, _ = mqadmin(sa.namesrv, "consumerProgress", "-g", unique("NoSuchGroup"))
    assert code == 1
    assert "no consume stats" in capsys.readouterr().err


def test_send_and_query_messages(sa: Standalone) -> None:
    topic = unique("AdmMsg")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2")
    bname = broker_name(sa)
    sent = rows(
        mqadmin_ok(
            sa.namesrv,
            "sendMessage",
            "-t",
            topic,
            "-p",
            "hello admin",
            "-k",
            "ORDER-7",
            "-c",
            "TagA",
            "-b",
            bname,
            "-i",
            "1",
        )
    )
    assert len(sent) == 1
    r = sent[0]
    assert (r["Broker Name"], r["QID"], r["Send Result"]) == (bname, "1", "SEND_OK")
    assert re.fullmatch(r"[0-9A-F]{32}", r["OffsetMsgId"])
    mqadmin_ok(sa.namesrv, "sendMessage", "-t", topic, "-p", "other", "-c", "TagB")

    by_id = mqadmin_ok(sa.namesrv, "queryMsgById", "-i", r["OffsetMsgId"])
    assert "hello admin" in by_id and "TagA" in by_id and "ORDER-7" in by_id
    # the client msgId (UNIQ_KEY) works with -t
    assert "hello admin" in mqadmin_ok(sa.namesrv, "queryMsgById", "-i", r["MsgId"], "-t", topic)

    deadline = time.monotonic() + 5  # the index is built by the dispatcher, asynchronously
    while True:
        code, text = mqadmin(sa.namesrv, "queryMsgByKey", "-t", topic, "-k", "ORDER-7")
        if code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert code == 0
    found = rows(text)
    assert [f["Offset Msg ID"] for f in found] == [r["OffsetMsgId"]]

    by_off = mqadmin_ok(
        sa.namesrv, "queryMsgByOffset", "-t", topic, "-b", bname, "-i", "1", "-o", r["Queue Offset"]
    )
    assert "hello admin" in by_off

    printed = mqadmin_ok(sa.namesrv, "printMsg", "-t", topic)
    assert "BODY: hello admin" in printed and "BODY: other" in printed
    only_b = mqadmin_ok(sa.namesrv, "printMsg", "-t", topic, "-s", "TagB", "-d", "false")
    assert "TAGS: TagB" in only_b and "TagA" not in only_b and "BODY:" not in only_b
    later = mqadmin_ok(sa.namesrv, "printMsg", "-t", topic, "-b", str(int(time.time() * 1000) + 60_000))
    assert "MSGID" not in later

    code, _ = mqadmin(sa.namesrv, "queryMsgByOffset", "-t", topic, "-b", bname, "-i", "1", "-o", "999")
    assert code == 1


def test_subgroup_progress_and_reset(sa: Standalone, admin: MQAdminExt) -> None:
    topic = unique("AdmProg")
    group = unique("AdmGroup")
    mqadmin_ok(sa.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    out = mqadmin_ok(sa.namesrv, "updateSubGroup", "-c", CLUSTER, "-g", group, "-r", "3")
    assert f"create subscription group to {sa.broker} success." in out
    for i in range(5):
        mqadmin_ok(sa.namesrv, "sendMessage", "-t", topic, "-p", f"m{i}")
    bname = broker_name(sa)
    # a consumer commits offset 3 (as a client's UPDATE_CONSUMER_OFFSET does)
    admin.update_consumer_offset(sa.broker, group, topic, 0, 3)
    prog = rows(mqadmin_ok(sa.namesrv, "consumerProgress", "-g", group))
    mine = [p for p in prog if p["Topic"] == topic]
    assert len(mine) == 1
    assert (
        mine[0]["Broker Name"],
        mine[0]["Broker Offset"],
        mine[0]["Consumer Offset"],
        mine[0]["Diff"],
    ) == (bname, "5", "3", "2")
    assert "Diff Total: 2" in mqadmin_ok(sa.namesrv, "consumerProgress", "-g", group)

    # nobody online: resetOffsetByTime falls back to writing the offsets in the broker
    out = mqadmin_ok(sa.namesrv, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    assert "rollback consumer offset" in out
    prog = [p for p in rows(mqadmin_ok(sa.namesrv, "consumerProgress", "-g", group)) if p["Topic"] == topic]
    assert prog[0]["Consumer Offset"] == "0"
    out = mqadmin_ok(sa.namesrv, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "now")
    prog = [p for p in rows(mqadmin_ok(sa.namesrv, "consumerProgress", "-g", group)) if p["Topic"] == topic]
    assert prog[0]["Consumer Offset"] == "5"

    code, _ = mqadmin(sa.namesrv, "consumerConnection", "-g", group)
    assert code == 1  # nobody online
