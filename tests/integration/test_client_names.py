"""Bad group and topic names fail at start() with a clear error (RocketMQ's client Validators); a
subscription to a topic the NameServer does not know is logged. Against a real NameServer process."""

from __future__ import annotations

import logging
import re

import pytest
from tests.helpers.procs import start_namesrv

import rocketq
from rocketq import ConsumeResult, LitePullConsumer, Producer, PushConsumer


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory):
    proc = start_namesrv(tmp_path_factory.mktemp("names"))
    yield proc.addr
    proc.stop()


@pytest.mark.parametrize(
    "group, reason",
    [
        ("bad group!", "group[bad group!] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        ("g" * 256, "group is longer than group max length 255."),
    ],
)
def test_bad_group_fails_at_start(namesrv: str, group: str, reason: str) -> None:
    consumer = PushConsumer(group, namesrv=namesrv)
    consumer.subscribe("TopicTest", "*")
    consumer.register_listener(lambda msgs: ConsumeResult.SUCCESS)
    with pytest.raises(rocketq.MQClientError, match=re.escape("The specified " + reason)):
        consumer.start()
    with pytest.raises(rocketq.MQClientError, match=re.escape("The specified " + reason)):
        Producer(group, namesrv=namesrv).start()
    lite = LitePullConsumer(group, namesrv=namesrv)
    lite.subscribe("TopicTest", "*")
    with pytest.raises(rocketq.MQClientError, match=re.escape("The specified " + reason)):
        lite.start()


def test_blank_group_is_refused() -> None:
    with pytest.raises(rocketq.MQClientError, match="consumerGroup is null"):
        PushConsumer("", namesrv="127.0.0.1:1")
    with pytest.raises(rocketq.MQClientError, match="group is blank"):
        Producer(" ", namesrv="127.0.0.1:1").start()


@pytest.mark.parametrize("topic", ["bad topic", "a/b", "t" * 128])
def test_bad_subscribed_topic_fails_at_start(namesrv: str, topic: str) -> None:
    consumer = PushConsumer("GoodGroup", namesrv=namesrv)
    consumer.subscribe(topic, "*")
    consumer.register_listener(lambda msgs: ConsumeResult.SUCCESS)
    with pytest.raises(rocketq.MQClientError, match="The specified topic"):
        consumer.start()


def test_missing_topic_is_logged(namesrv: str, caplog: pytest.LogCaptureFixture) -> None:
    consumer = PushConsumer("GroupOfMissingTopic", namesrv=namesrv)
    consumer.subscribe("NoSuchTopic_x1", "*")
    consumer.register_listener(lambda msgs: ConsumeResult.SUCCESS)
    with caplog.at_level(logging.WARNING, logger="rocketq.client"):
        consumer.start()
        consumer.shutdown()
    warnings = [r.getMessage() for r in caplog.records if r.name == "rocketq.client"]
    assert any("NoSuchTopic_x1, which does not exist" in m for m in warnings), warnings
    assert not any("%RETRY%" in m for m in warnings)  # the group's retry topic is the broker's to create
