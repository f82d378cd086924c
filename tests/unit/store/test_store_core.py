"""MessageStore core: on-disk layout, puts, batches, lookups, validation."""

from __future__ import annotations

import os
import struct
import threading
import time

from store_helpers import HOST, msg, open_store

from rocketq.protocol import sysflag as sf
from rocketq.protocol.properties import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketq.protocol.record import BLANK_MAGIC_CODE, decode_record, encode_record
from rocketq.store import GetMessageStatus, MessageToStore, PutMessageStatus
from rocketq.store.dispatch import tag_hash_code


def test_store_writes_exactly_the_codec_record(tmp_path):
    s = open_store(tmp_path)
    try:
        m = msg(body=b"payload", tags="TagA", keys="k1", flag=3, sys_flag=0, born_timestamp=123,
                born_host=("10.0.0.7", 4444), reconsume_times=1, queue_id=2)  # fmt: skip
        r = s.put_message(m)
        assert r.status is PutMessageStatus.PUT_OK and r.msg_num == 1
        view = s.look_message_by_offset(r.wrote_offset)
        expected = encode_record(
            b"payload", "T", "TAGS\x01TagA\x02KEYS\x01k1", queue_id=2, flag=3, queue_offset=0,
            phys_offset=r.wrote_offset, born_timestamp=123, born_host=("10.0.0.7", 4444),
            store_timestamp=r.store_timestamp, store_host=HOST, reconsume_times=1,
        )  # fmt: skip
        assert bytes(view) == expected  # byte for byte
        assert r.wrote_bytes == len(expected)
        assert r.msg_ids == [decode_record(view).offset_msg_id]
        view.release()
    finally:
        s.shutdown()


def test_commitlog_file_names_and_roll_with_blank_magic(tmp_path):
    s = open_store(tmp_path)
    body = b"x" * 3000
    try:
        results = [s.put_message(msg(body=body)) for _ in range(40)]
        assert all(r.ok for r in results)
    finally:
        s.shutdown()
    seg = 64 * 1024
    names = sorted(n for n in os.listdir(tmp_path / "commitlog") if not n.endswith(".tmp"))
    assert names[:2] == ["00000000000000000000", f"{seg:020d}"]
    assert all(os.path.getsize(tmp_path / "commitlog" / n) == seg for n in names)
    # the first record that did not fit went to the next file; the gap is one blank record
    first_in_second = next(r for r in results if r.wrote_offset >= seg)
    assert first_in_second.wrote_offset == seg
    last_in_first = max((r for r in results if r.wrote_offset < seg), key=lambda r: r.wrote_offset)
    end = last_in_first.wrote_offset + last_in_first.wrote_bytes
    with open(tmp_path / "commitlog" / names[0], "rb") as f:
        f.seek(end)
        size, magic = struct.unpack(">ii", f.read(8))
    assert magic == BLANK_MAGIC_CODE == -875286124
    assert size == seg - end
    # and the queue offsets stayed consecutive across the roll
    assert [r.queue_offset for r in results] == list(range(40))


def test_consume_queue_unit_layout_on_disk(tmp_path):
    s = open_store(tmp_path)
    try:
        rs = [s.put_message(msg(queue_id=1, tags=t)) for t in ("A", None, "TagB")]
    finally:
        s.shutdown()
    cq_dir = tmp_path / "consumequeue" / "T" / "1"
    assert sorted(os.listdir(cq_dir)) == ["00000000000000000000"]
    raw = (cq_dir / "00000000000000000000").read_bytes()
    assert len(raw) == 20 * 100  # mapped_file_size_consume_queue
    for i, (r, tag) in enumerate(zip(rs, ("A", None, "TagB"), strict=True)):
        off, size, code = struct.unpack(">qiq", raw[i * 20 : i * 20 + 20])
        assert (off, size) == (r.wrote_offset, r.wrote_bytes)
        assert code == (tag_hash_code(tag) if tag else 0)
    assert raw[60:80] == bytes(20)
    assert tag_hash_code("TagA") == 2_598_919  # Java "TagA".hashCode()
    assert tag_hash_code("null") == 3_392_903


def test_consume_queue_second_file_named_by_byte_offset(tmp_path):
    s = open_store(tmp_path)
    try:
        for _ in range(150):
            assert s.put_message(msg(body=b"b")).ok
    finally:
        s.shutdown()
    names = sorted(os.listdir(tmp_path / "consumequeue" / "T" / "0"))
    assert names == ["00000000000000000000", "00000000000000002000"]


def test_validation_statuses(tmp_path):
    s = open_store(tmp_path)
    try:
        assert s.put_message(msg(topic="t" * 128)).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert s.put_message(msg(body=b"x" * 20000)).status is PutMessageStatus.MESSAGE_ILLEGAL
        big = msg(properties={"P": "v" * 40000})
        assert s.put_message(big).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        assert s.put_message(msg()).ok
        assert s.runtime_info()["putMessageFailedTimes"] == "3"
    finally:
        s.shutdown()
    assert s.put_message(msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_slave_refuses_puts(tmp_path):
    s = open_store(tmp_path, broker_role="SLAVE")
    try:
        assert s.put_message(msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        s.shutdown()


def test_batch_is_contiguous_with_consecutive_offsets(tmp_path):
    s = open_store(tmp_path)
    try:
        s.put_message(msg(queue_id=3))
        batch = [msg(queue_id=3, body=f"m{i}".encode(), keys=f"k{i}", tags="B") for i in range(5)]
        r = s.put_messages("T", 3, batch)
        assert r.ok and r.msg_num == 5 and r.queue_offset == 1 and len(r.msg_ids) == 5
        g = s.get_message("g", "T", 3, 1, 32, None)
        ms = [decode_record(b, verify_crc=True) for b in g.buffers]
        assert [m.queue_offset for m in ms] == [1, 2, 3, 4, 5]
        assert [bytes(m.body) for m in ms] == [f"m{i}".encode() for i in range(5)]
        assert ms[0].commit_log_offset == r.wrote_offset
        assert sum(m.store_size for m in ms) == r.wrote_bytes
        assert [m.offset_msg_id for m in ms] == r.msg_ids
        g.release()
    finally:
        s.shutdown()


def test_lookups_time_search_and_query(tmp_path):
    s = open_store(tmp_path)
    try:
        r0 = s.put_message(msg(keys="alpha beta"))
        time.sleep(0.02)
        t_mid = int(time.time() * 1000)
        time.sleep(0.02)
        r1 = s.put_message(msg(keys="gamma", properties={"UNIQ_KEY": "U1"}))
        assert s.get_earliest_message_time("T", 0) == r0.store_timestamp
        assert s.get_message_store_timestamp("T", 0, 1) == r1.store_timestamp
        assert s.get_offset_in_queue_by_time("T", 0, 0) == 0
        assert s.get_offset_in_queue_by_time("T", 0, t_mid) == 1
        assert s.get_offset_in_queue_by_time("T", 0, r1.store_timestamp + 1000) == 2
        assert s.get_offset_in_queue_by_time("Nope", 0, 0) == 0
        assert s.look_message_by_offset(10**12) is None
        deadline = time.monotonic() + 5
        while s.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        q = s.query_message("T", "beta", 32, 0, 2**62)
        assert [decode_record(b).commit_log_offset for b in q.buffers] == [r0.wrote_offset]
        q = s.query_message("T", "U1", 32, 0, 2**62)
        assert [decode_record(b).commit_log_offset for b in q.buffers] == [r1.wrote_offset]
        assert s.query_message("Other", "beta", 32, 0, 2**62).buffers == []
        q.release()
    finally:
        s.shutdown()


def test_arrival_listener_runs_after_unit_is_visible(tmp_path):
    s = open_store(tmp_path)
    seen = []

    def listener(topic, qid, max_offset):
        seen.append((topic, qid, max_offset, s.get_max_offset_in_queue(topic, qid), threading.get_ident()))

    s.set_arrival_listener(listener)
    try:
        s.put_message(msg(queue_id=1))
        s.put_messages("T", 1, [msg(queue_id=1), msg(queue_id=1)])
    finally:
        s.shutdown()
    me = threading.get_ident()
    assert seen == [("T", 1, 1, 1, me), ("T", 1, 3, 3, me)]


def test_transaction_prepared_and_rollback_not_consumable(tmp_path):
    s = open_store(tmp_path)
    try:
        p = s.put_message(msg(sys_flag=sf.TRANSACTION_PREPARED_TYPE))
        rb = s.put_message(msg(sys_flag=sf.TRANSACTION_ROLLBACK_TYPE))
        c = s.put_message(msg(sys_flag=sf.TRANSACTION_COMMIT_TYPE))
        assert (p.queue_offset, rb.queue_offset, c.queue_offset) == (0, 0, 0)
        assert s.get_max_offset_in_queue("T", 0) == 1
        assert (
            decode_record(s.look_message_by_offset(p.wrote_offset)).sys_flag == sf.TRANSACTION_PREPARED_TYPE
        )
        # half messages keep their queue even if the broker left the PREPARED flag on
        h = s.put_message(msg(topic=TRANS_HALF_TOPIC, sys_flag=sf.TRANSACTION_PREPARED_TYPE))
        h2 = s.put_message(msg(topic=TRANS_HALF_TOPIC, sys_flag=sf.TRANSACTION_PREPARED_TYPE))
        assert (h.queue_offset, h2.queue_offset) == (0, 1)
    finally:
        s.shutdown()


def test_schedule_topic_tags_code_is_delivery_time(tmp_path):
    s = open_store(tmp_path)
    try:
        r = s.put_message(MessageToStore(SCHEDULE_TOPIC, 2, b"d", properties={"DELAY": "3"}))
        unit = s.find_consume_queue(SCHEDULE_TOPIC, 2).get_unit(0)
        assert unit[2] == r.store_timestamp + 10_000  # level 3 = 10 s
        r2 = s.put_message(MessageToStore(SCHEDULE_TOPIC, 2, b"d", properties={"DELAY": "3"}, tags_code=77))
        assert s.find_consume_queue(SCHEDULE_TOPIC, 2).get_unit(1)[2] == 77
        assert r2.ok
    finally:
        s.shutdown()


def test_delete_topics_drops_queues(tmp_path):
    s = open_store(tmp_path)
    try:
        for q in range(2):
            s.put_message(msg(topic="Gone", queue_id=q))
        s.put_message(msg(topic="Kept"))
        s.delete_topics({"Gone"})
        assert not (tmp_path / "consumequeue" / "Gone").exists()
        assert s.get_max_offset_in_queue("Gone", 0) == 0
        assert s.get_message("g", "Gone", 0, 0, 32, None).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
        assert s.put_message(msg(topic="Gone")).queue_offset == 0
        assert s.get_max_offset_in_queue("Kept", 0) == 1
    finally:
        s.shutdown()
    s = open_store(tmp_path)  # and a restart does not resurrect the old queue contents
    try:
        assert s.get_max_offset_in_queue("Gone", 0) == 1
        assert s.get_max_offset_in_queue("Gone", 1) == 0
    finally:
        s.shutdown()


def test_runtime_info_counts(tmp_path):
    s = open_store(tmp_path)
    try:
        for _ in range(10):
            s.put_message(msg())
        info = s.runtime_info()
        assert info["putMessageTimesTotal"] == "10"
        assert int(info["commitLogMaxOffset"]) == s.max_phy_offset > 0
        assert s.min_phy_offset == 0
        assert "putTps" in info and "commitLogDiskRatio" in info
    finally:
        s.shutdown()


def test_concurrent_puts_get_gapless_offsets(tmp_path):
    s = open_store(tmp_path)
    results: list = []
    lock = threading.Lock()

    def worker(n):
        mine = [s.put_message(msg(queue_id=0, body=b"w%d-%d" % (n, i))) for i in range(300)]
        batch = s.put_messages("T", 0, [msg(queue_id=0, body=b"b%d-%d" % (n, i)) for i in range(3)])
        with lock:
            results.extend((r.queue_offset, r.wrote_offset) for r in mine)
            results.extend((batch.queue_offset + k, None) for k in range(3))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(q for q, _ in results) == list(range(4 * 303))
        r = s.get_message("g", "T", 0, 0, 32, None)
        phys = [decode_record(b).commit_log_offset for b in r.buffers]
        assert phys == sorted(phys)  # queue order is CommitLog order
        r.release()
    finally:
        s.shutdown()
