from __future__ import annotations

import asyncio
import json
import threading

import pytest

from rocketq.broker.client_manager import ClientChannelInfo, ClientManager
from rocketq.broker.config import load_config
from rocketq.broker.delay import DelayLevels
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.persist import read_json, write_atomic
from rocketq.broker.subscription import SubscriptionData, filter_for, java_string_hash
from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.broker.topic_manager import TopicConfigManager
from rocketq.broker.validation import check_send_topic, check_topic
from rocketq.protocol.route import TopicConfig


@pytest.fixture
def cfg(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text(f"storePathRootDir={tmp_path}/store\nmessageDelayLevel=1s 2s 3s\n")
    return load_config(str(conf))


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogates, as Java hashes
    from rocketq.protocol.tags import tags_code

    for s in ("TagA", "a much longer tag that overflows int32 many times", "标签", "\U0001f600x"):
        assert java_string_hash(s) == tags_code(s)
    h = java_string_hash("a" * 100)
    assert -(2**31) <= h < 2**31


def test_subscription_and_filter():
    sd = SubscriptionData.build("T", "TagA || TagB")
    assert sd.tags_set == {"TagA", "TagB"}
    f = filter_for(sd)
    assert f.is_matched_by_consume_queue(java_string_hash("TagA"))
    assert not f.is_matched_by_consume_queue(java_string_hash("TagC"))
    assert f.is_matched_by_consume_queue(None)
    assert filter_for(SubscriptionData.build("T", "*")) is None
    assert filter_for(SubscriptionData.build("T", "")) is None


def test_topic_validation():
    assert check_topic("Topic_A-1%|x") is None
    assert check_topic("a b") and check_topic("") and check_topic("x" * 128)
    assert check_send_topic("TBW102")


def test_topic_manager_system_topics_and_persistence(cfg, tmp_path):
    tm = TopicConfigManager(cfg)
    tm.load()
    assert tm.get("SCHEDULE_TOPIC_XXXX").write_queue_nums == 3
    assert tm.get("TBW102") is None  # autoCreateTopicEnable is false by default
    for name in (
        "SELF_TEST_TOPIC",
        "DefaultCluster",
        "broker-a",
        "DefaultCluster_REPLY_TOPIC",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
    ):
        assert tm.get(name) is not None, name
    changes = []
    tm.on_change = lambda: changes.append(1)
    v0 = tm.data_version.counter
    tm.update(TopicConfig("T1", 4, 4, 6))
    assert tm.data_version.counter == v0 + 1 and changes == [1]
    tm.update(TopicConfig("T2", 2, 2, 6), notify=False)
    assert changes == [1]
    tm.persist_sync()
    again = TopicConfigManager(cfg)
    again.load()
    assert again.get("T1").read_queue_nums == 4 and again.data_version.counter == tm.data_version.counter
    # auto-create needs TBW102 with INHERIT, i.e. autoCreateTopicEnable
    assert tm.create_in_send("T3", "TBW102", 4, 0) is None


def test_auto_create_from_tbw102(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text(f"storePathRootDir={tmp_path}/store\nautoCreateTopicEnable=true\n")
    tm = TopicConfigManager(load_config(str(conf)))
    tm.load()
    assert tm.get("TBW102").perm == 7 and tm.get("TBW102").write_queue_nums == 8
    tc = tm.create_in_send("NEW", "TBW102", 4, 0)
    assert tc.write_queue_nums == 4 and tc.perm == 6


def test_offsets_json_layout(cfg):
    om = ConsumerOffsetManager(cfg)
    om.commit("G", "T", 0, 12)
    om.commit("G", "%RETRY%G", 0, 1)
    assert om.query("G", "T", 0) == 12 and om.query("G", "T", 1) == -1 and om.query("X", "T", 0) == -1
    om.persist_sync()
    with open(f"{cfg.config_dir}/consumerOffset.json") as f:
        data = json.load(f)
    assert data == {"offsetTable": {"T@G": {"0": 12}, "%RETRY%G@G": {"0": 1}}}
    again = ConsumerOffsetManager(cfg)
    again.load()
    assert again.query("G", "T", 0) == 12
    again.remove_topic("T")
    assert again.query("G", "T", 0) == -1


def test_subscription_groups(cfg):
    sm = SubscriptionGroupManager(cfg)
    sm.load()
    assert sm.get("TOOLS_CONSUMER") is not None
    g = sm.find_or_create("CG")
    assert g.retry_queue_nums == 1 and g.retry_max_times == 16
    sm.persist_sync()
    again = SubscriptionGroupManager(cfg)
    again.load()
    assert again.get("CG").consume_enable is True


def test_atomic_write_and_backup(tmp_path):
    p = str(tmp_path / "c" / "x.json")
    write_atomic(p, b'{"a":1}')
    write_atomic(p, b'{"a":2}')
    assert read_json(p) == {"a": 2}
    with open(p, "w") as f:
        f.write("{corrupt")
    assert read_json(p) == {"a": 1}  # falls back to the .bak copy


def test_delay_redirect():
    d = DelayLevels([1000, 2000, 3000])
    props = {"DELAY": "7"}
    topic, qid, due = d.redirect(props, "T", 2, 10_000)
    assert (topic, qid, due) == ("SCHEDULE_TOPIC_XXXX", 2, 13_000)
    assert props["DELAY"] == "3" and props["REAL_TOPIC"] == "T" and props["REAL_QID"] == "2"
    assert d.redirect({"DELAY": "0"}, "T", 0, 0) is None
    assert d.redirect({"DELAY": "x"}, "T", 0, 0) is None


class _FakeChannel:
    _ids = iter(range(1, 1000))

    def __init__(self):
        self.id = next(self._ids)
        self.closed = False
        self.remote_addr = "127.0.0.1:1"

    def close(self):
        self.closed = True


def test_client_manager_membership_and_expiry():
    cm = ClientManager(expire_s=0.05)
    changed = []
    cm.on_consumer_ids_changed = changed.append
    a, b = _FakeChannel(), _FakeChannel()
    subs = [SubscriptionData.build("T", "*")]
    assert cm.register_consumer("G", ClientChannelInfo(a, "a", "JAVA", 1), "P", "CLUSTERING", "F", subs, True)
    assert not cm.register_consumer(
        "G", ClientChannelInfo(a, "a", "JAVA", 1), "P", "CLUSTERING", "F", subs, True
    )
    cm.register_consumer("G", ClientChannelInfo(b, "b", "JAVA", 1), "P", "CLUSTERING", "F", subs, True)
    assert changed == ["G", "G"]
    assert sorted(cm.get_consumer_group("G").client_ids()) == ["a", "b"]
    cm.channel_closed(b)
    assert cm.get_consumer_group("G").client_ids() == ["a"]
    import time

    time.sleep(0.1)
    cm.scan_expired()
    assert cm.get_consumer_group("G") is None and a.closed


def test_long_polling_wakes_from_another_thread():
    async def go():
        max_offsets = {"v": 0}
        answered = []

        def repull(ch, req):
            answered.append(max_offsets["v"])
            return "response"

        svc = PullRequestHoldService(repull, lambda t, q: max_offsets["v"])
        svc.start()
        ch = _FakeChannel()
        task = asyncio.ensure_future(svc.hold("T", 0, ch, object(), 0, 5.0))
        await asyncio.sleep(0.05)
        assert svc.held_count == 1

        def arrive():
            max_offsets["v"] = 1
            svc.arrival_listener("T", 0, 1)

        threading.Thread(target=arrive).start()
        assert await asyncio.wait_for(task, 2.0) == "response"
        assert answered == [1] and svc.held_count == 0
        # timeout path
        r = await svc.hold("T", 0, ch, object(), 5, 0.1)
        assert r == "response" and svc.held_count == 0
        svc.stop()

    asyncio.run(go())


def test_loads_java_written_config_files(cfg):
    """RocketMQ (fastjson) writes integer map keys unquoted; those files load unchanged."""
    import os

    os.makedirs(cfg.config_dir, exist_ok=True)
    with open(f"{cfg.config_dir}/consumerOffset.json", "w") as f:
        f.write('{"offsetTable":{"TopicTest@CG":{0:12,1:3},"%RETRY%CG@CG":{0:0}}}')
    with open(f"{cfg.config_dir}/delayOffset.json", "w") as f:
        f.write('{"offsetTable":{1:5,3:7}}')
    with open(f"{cfg.config_dir}/topics.json", "w") as f:
        f.write(
            '{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":'
            '{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest",'
            '"topicSysFlag":0,"writeQueueNums":4}}}'
        )
    om = ConsumerOffsetManager(cfg)
    om.load()
    assert om.query("CG", "TopicTest", 1) == 3
    tm = TopicConfigManager(cfg)
    tm.load()
    assert tm.get("TopicTest").write_queue_nums == 4 and tm.data_version.counter == 3
    assert read_json(f"{cfg.config_dir}/delayOffset.json") == {"offsetTable": {1: 5, 3: 7}}
