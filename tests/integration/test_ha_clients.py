"""The seed's promise for multi-master multi-slave (集群搭建 1.3/1.4): when a master dies, consumers go on
reading its messages from its slave and producers go on sending to the other masters; when it returns, no
acknowledged message is missing. Real processes: broker-a (SYNC_MASTER + SLAVE), broker-b (a master alone)."""

from __future__ import annotations

import asyncio
import threading
import time

from tests.integration.ha_support import (
    create_topic,
    invoke,
    start_ha_cluster,
    topic_on,
    wait_slave_attached,
    wait_until,
)

from rocketq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer, SendStatus
from rocketq.client.instance import ClientConfig
from rocketq.protocol.codes import RequestCode, ResponseCode

TOPIC = "HA_CLIENTS"


def test_consumers_read_from_the_slave_and_producers_use_the_other_master(tmp_path):
    c = start_ha_cluster(tmp_path)
    fast = ClientConfig(poll_name_server_interval=1.0, heartbeat_broker_interval=2.0,
                        persist_consumer_offset_interval=1.0, rebalance_interval=2.0)  # fmt: skip
    try:
        a = c.add("a", "broker-a", "SYNC_MASTER")
        b = c.add("b", "broker-b", "ASYNC_MASTER")
        for m in (a, b):
            create_topic(m.addr, TOPIC, 2)
        s = c.add("as", "broker-a", "SLAVE", 1)
        wait_slave_attached(a)
        wait_until(lambda: topic_on(s.addr, TOPIC), 30, "the topic on the slave")

        received: list[bytes] = []
        lock = threading.Lock()

        def listener(msgs):
            time.sleep(0.005 * len(msgs))  # a consumer slower than the producer: a backlog when a dies
            with lock:
                received.extend(bytes(m.body) for m in msgs)
            return ConsumeResult.SUCCESS

        acked: dict[bytes, str] = {}
        with Producer("PG_ha_clients", namesrv=c.ns, client_config=fast) as p:
            for i in range(400):
                r = p.send(Message(TOPIC, b"before-%d" % i))
                assert r.status is SendStatus.SEND_OK
                acked[b"before-%d" % i] = r.queue.broker_name
            assert set(acked.values()) == {"broker-a", "broker-b"}

            # one slow consume thread, a small cache per queue: most of the backlog is still on the brokers
            consumer = PushConsumer(
                "CG_ha_clients", namesrv=c.ns, client_config=fast, pull_batch_size=8,
                pull_threshold_for_queue=8, consume_thread_min=1, consume_thread_max=1,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )  # fmt: skip
            consumer.subscribe(TOPIC, "*")
            consumer.register_listener(listener)
            consumer.start()
            try:
                wait_until(lambda: len(received) >= 40, 30, "consumption to start")
                c.kill("a")
                assert len(received) < 400  # some of broker-a's messages wait on its slave only
                # producers skip broker-a (no master) and go on with broker-b
                for i in range(100):
                    r = p.send(Message(TOPIC, b"during-%d" % i))
                    assert r.status is SendStatus.SEND_OK
                    acked[b"during-%d" % i] = r.queue.broker_name
                assert {acked[b"during-%d" % i] for i in range(50, 100)} == {"broker-b"}
                wanted = {k for k in acked}
                wait_until(lambda: wanted <= set(received), 60, "every acked message, a's from its slave")

                # offsets of broker-a's queues were committed at the slave meanwhile
                def slave_offsets_moved() -> bool:
                    for qid in range(2):
                        ext = {"consumerGroup": "CG_ha_clients", "topic": TOPIC, "queueId": str(qid)}
                        resp = asyncio.run(invoke(s.addr, RequestCode.QUERY_CONSUMER_OFFSET, ext))
                        if resp.code != ResponseCode.SUCCESS or int(resp.ext_fields["offset"]) <= 0:
                            return False
                    return True

                wait_until(slave_offsets_moved, 20, "offsets committed at the slave")

                c.start("a")  # the master returns: messages sent from now on reach its queues again
                wait_slave_attached(a, timeout=60)

                def send_after() -> bool:
                    for i in range(20):
                        r = p.send(Message(TOPIC, b"after-%d" % i))
                        acked[b"after-%d" % i] = r.queue.broker_name
                    return "broker-a" in {acked[b"after-%d" % i] for i in range(20)}

                wait_until(send_after, 30, "sends to broker-a again")
                wanted = set(acked)
                wait_until(lambda: wanted <= set(received), 60, "every acked message after a's return")
            finally:
                consumer.shutdown()
    finally:
        c.close()
