"""get_message statuses and next-begin offsets (spec §8, RocketMQ GetMessageStatus)."""

from __future__ import annotations

import pytest
from store_helpers import Tags, msg, open_store

from rocketq.protocol.record import decode_record
from rocketq.store import GetMessageStatus as S


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path, mapped_file_size_consume_queue=20 * 1000)
    yield s
    s.shutdown()


def get(s, offset, n=32, flt=None, topic="T", qid=0):
    r = s.get_message("g", topic, qid, offset, n, flt)
    out = (r.status, r.next_begin_offset, r.min_offset, r.max_offset)
    qoffs = [decode_record(b).queue_offset for b in r.buffers]
    assert r.message_count == len(r.buffers) and r.buffer_total_size == sum(len(b) for b in r.buffers)
    r.release()
    return out, qoffs


def test_unknown_and_empty_queue(store):
    assert get(store, 0)[0] == (S.NO_MESSAGE_IN_QUEUE, 0, 0, 0)  # broker: offset 0 -> PULL_NOT_FOUND
    assert get(store, 5)[0] == (S.NO_MESSAGE_IN_QUEUE, 0, 0, 0)  # offset != 0 -> PULL_OFFSET_MOVED, next 0


def test_offsets_relative_to_min_and_max(store):
    for i in range(10):
        store.put_message(msg(body=b"%d" % i))
    assert get(store, 10)[0] == (S.OFFSET_OVERFLOW_ONE, 10, 0, 10)  # == max: next = offset
    assert get(store, 15)[0] == (S.OFFSET_OVERFLOW_BADLY, 10, 0, 10)  # > max: next = max
    (st, nxt, lo, hi), qoffs = get(store, 3, 4)
    assert (st, nxt, lo, hi) == (S.FOUND, 7, 0, 10) and qoffs == [3, 4, 5, 6]  # next = offset + scanned
    (st, nxt, _, _), qoffs = get(store, 7, 32)
    assert (st, nxt) == (S.FOUND, 10) and qoffs == [7, 8, 9]


def test_offset_too_small_after_min_moves(store):
    cq = None
    for i in range(10):
        store.put_message(msg(body=b"%d" % i))
    cq = store.find_consume_queue("T", 0)
    cq.min_logic_offset = 4 * 20  # what retention does (correct_min_offset)
    assert get(store, 2)[0] == (S.OFFSET_TOO_SMALL, 4, 4, 10)  # next = min
    assert get(store, 4, 1)[1] == [4]


def test_tag_filtering_with_gaps(store):
    tags = ["A", "B", "B", "A", "C", "B", "B", "B", "A"]
    for t in tags:
        store.put_message(msg(tags=t))
    (st, nxt, _, _), qoffs = get(store, 0, 32, Tags("A"))
    assert st is S.FOUND and qoffs == [0, 3, 8] and nxt == 9
    (st, nxt, _, _), qoffs = get(store, 1, 1, Tags("A"))
    assert (st, qoffs, nxt) == (S.FOUND, [3], 4)  # batch full after the first match: next = just past it
    (st, nxt, _, _), qoffs = get(store, 4, 32, Tags("Z"))
    assert (st, nxt, qoffs) == (S.NO_MATCHED_MESSAGE, 9, [])  # everything scanned was filtered: next advanced
    (st, nxt, _, _), qoffs = get(store, 0, 32, Tags("A", "C"))
    assert qoffs == [0, 3, 4, 8]


def test_commit_log_filter_is_applied(store):
    for i in range(4):
        store.put_message(msg(body=b"%d" % i, tags="A"))

    class OddBodies(Tags):
        def is_matched_by_commit_log(self, record):
            return int(bytes(decode_record(record).body)) % 2 == 1

    (st, nxt, _, _), qoffs = get(store, 0, 32, OddBodies("A"))
    assert (st, nxt, qoffs) == (S.FOUND, 4, [1, 3])


def test_scan_is_bounded_when_nothing_matches(store):
    for _ in range(900):
        store.put_message(msg(tags="B", body=b""))
    (st, nxt, _, _), qoffs = get(store, 0, 32, Tags("A"))
    assert st is S.NO_MATCHED_MESSAGE and qoffs == [] and nxt == 800  # max(16000 B, 32 * 20) of units


def test_transfer_limits(tmp_path):
    s = open_store(tmp_path, max_transfer_bytes_on_message_in_memory=1000, max_message_size=4096)
    try:
        for _ in range(10):
            s.put_message(msg(body=b"x" * 400))
        (_st, nxt, _, _), qoffs = get(s, 0, 32)
        assert qoffs == [0, 1] and nxt == 2  # third would exceed 1000 bytes
        s2 = s.put_message(msg(body=b"y" * 2000))
        (_st, nxt, _, _), qoffs = get(s, s2.queue_offset, 32)
        assert qoffs == [s2.queue_offset]  # one message always goes even if bigger than the byte budget
    finally:
        s.shutdown()


def test_transfer_count_limit(store):
    for _ in range(40):
        store.put_message(msg(body=b""))
    (_st, nxt, _, _), qoffs = get(store, 0, 64)
    assert len(qoffs) == 32 and nxt == 32  # maxTransferCountOnMessageInMemory


def test_reads_stop_at_consume_queue_file_end(tmp_path):
    s = open_store(tmp_path)  # 100 units per CQ file
    try:
        for _ in range(150):
            s.put_message(msg(body=b""))
        (_st, nxt, _, _), qoffs = get(s, 90, 32)
        assert qoffs == list(range(90, 100)) and nxt == 100
        assert get(s, 100, 32)[1][0] == 100
    finally:
        s.shutdown()


def test_buffers_are_views_of_the_mapped_file(store):
    r0 = store.put_message(msg(body=b"zero-copy"))
    r = store.get_message("g", "T", 0, 0, 1, None)
    buf = r.buffers[0]
    assert isinstance(buf, memoryview) and buf.readonly is False
    assert bytes(buf) == bytes(store.look_message_by_offset(r0.wrote_offset))
    r.release()
    assert r.buffers == []
