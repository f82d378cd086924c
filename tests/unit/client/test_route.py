"""Route → queue selection and the latency fault tolerance tables."""

from __future__ import annotations

from rocketq.client.route import (
    LatencyFaultTolerance,
    TopicRouteData,
    loads_lenient,
    topic_route_to_publish_info,
    topic_route_to_subscribe_info,
)

ROUTE = {
    "brokerDatas": [
        {"brokerName": "broker-a", "cluster": "C", "brokerAddrs": {"0": "127.0.0.1:10911"}},
        {
            "brokerName": "broker-b",
            "cluster": "C",
            "brokerAddrs": {"0": "127.0.0.1:10921", "1": "127.0.0.1:10922"},
        },
        {"brokerName": "broker-s", "cluster": "C", "brokerAddrs": {"1": "127.0.0.1:10931"}},
    ],
    "queueDatas": [
        {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "writeQueueNums": 4},
        {"brokerName": "broker-b", "perm": 4, "readQueueNums": 2, "writeQueueNums": 2},
        {"brokerName": "broker-s", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
    ],
}


def test_publish_uses_writable_master_queues_subscribe_readable() -> None:
    route = TopicRouteData.from_json(ROUTE)
    pub = topic_route_to_publish_info("T", route)
    assert {(q.broker_name, q.queue_id) for q in pub.queues} == {("broker-a", i) for i in range(4)}
    sub = topic_route_to_subscribe_info("T", route)
    assert len(sub) == 8


def test_lenient_json_with_bare_int_keys() -> None:
    obj = loads_lenient(b'{"brokerDatas":[{"brokerAddrs":{0:"1.2.3.4:5"},"brokerName":"b"}],"queueDatas":[]}')
    assert obj["brokerDatas"][0]["brokerAddrs"] == {"0": "1.2.3.4:5"}


def test_order_topic_conf() -> None:
    route = TopicRouteData.from_json({**ROUTE, "orderTopicConf": "broker-a:2;broker-b:1"})
    pub = topic_route_to_publish_info("T", route)
    assert pub.order_topic and [(q.broker_name, q.queue_id) for q in pub.queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
    ]


def test_select_avoids_last_broker() -> None:
    route = TopicRouteData.from_json(
        {
            "brokerDatas": [
                {"brokerName": n, "brokerAddrs": {"0": f"127.0.0.1:{p}"}} for n, p in (("a", 1), ("b", 2))
            ],
            "queueDatas": [
                {"brokerName": n, "perm": 6, "readQueueNums": 2, "writeQueueNums": 2} for n in "ab"
            ],
        }
    )
    pub = topic_route_to_publish_info("T", route)
    for _ in range(10):
        assert pub.select_one("a").broker_name == "b"
    fault = LatencyFaultTolerance()
    fault.update("a", 0, isolation=True)  # failed send → a is skipped for a while
    for _ in range(10):
        assert fault.select(pub, None).broker_name == "b"
    fault.update("b", 0, isolation=True)  # everything faulty → still returns a queue
    assert fault.select(pub, None).broker_name in ("a", "b")


def test_not_available_duration_table() -> None:
    f = LatencyFaultTolerance.not_available_duration_ms
    assert [f(x) for x in (10, 50, 100, 549, 550, 1000, 2000, 3000, 15000, 30000)] == [
        0,
        0,
        0,
        0,
        30000,
        60000,
        120000,
        180000,
        600000,
        600000,
    ]


def test_latency_fault_table_is_off_by_default_as_in_rocketmq() -> None:
    # DefaultMQProducer's sendLatencyFaultEnable is false: a send picks the next queue round robin, a
    # retry avoids the broker that failed last, and nothing is recorded per send
    from rocketq.client.producer import Producer

    p = Producer("PG_default")
    assert p.send_latency_fault_enable is False
    p._update_fault("broker-a", 0.0, isolation=True)
    assert p._fault.is_available("broker-a")
    on = Producer("PG_on", send_latency_fault_enable=True)
    on._update_fault("broker-a", 0.0, isolation=True)
    assert not on._fault.is_available("broker-a")
