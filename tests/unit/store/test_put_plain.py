"""MessageStore.put_plain (the broker's send path for a message stored with its client's property string): the
same records, ConsumeQueue units, ids, offsets, listener calls and index entries as put_message, and
put_message's result wherever it does not store on its own (SYNC_FLUSH, refusals, failures)."""

from __future__ import annotations

import random

from store_helpers import StoreClock, assert_same_store_files, open_store, random_append_runs, wait_for

from rocketq.protocol.record import decode_record
from rocketq.store import FlushDiskType, MessageToStore, PutMessageResult, PutMessageStatus
from rocketq.store import commit_log as commit_log_module
from rocketq.store.dispatch import tag_hash_code

HOSTS = (("127.0.0.1", 5555), ("10.1.2.3", 40000), ("::1", 7))


def _fields(rnd: random.Random, qid: int, body: bytes, i: int) -> tuple:
    """put_plain's arguments: (topic, queue_id, body, flag, sys_flag, born_timestamp, born_host,
    reconsume_times, tags_code, properties_raw)."""
    tags = rnd.choice((None, "TagA", "标签"))
    props = f"UNIQ_KEY\x01U{i:031d}\x02WAIT\x01true"
    if tags:
        props = f"TAGS\x01{tags}\x02" + props
    if rnd.random() < 0.3:
        props += f"\x02KEYS\x01k{i} shared"
    props += "\x02CLUSTER\x01DefaultCluster"
    return (
        rnd.choice(("T", "Other")), qid, body, rnd.randrange(4), rnd.choice((0, 1)), rnd.randrange(1 << 41),
        rnd.choice(HOSTS), rnd.randrange(3), tag_hash_code(tags) if tags else 0, props.encode(),
    )  # fmt: skip


def test_same_files_ids_and_offsets_as_put_message(tmp_path, monkeypatch):
    """Two stores given the same messages, one through put_message and one through put_plain, across
    segment rolls and two topics: byte-identical CommitLog and ConsumeQueue files, the same offsetMsgId and
    queue offset per message, and put_plain answered without a result object after each topic's first put."""
    rnd = random.Random(11)
    runs = random_append_runs(3)
    messages = [_fields(rnd, qid, body, i) for i, (qid, body) in enumerate(m for _, b in runs for m in b)]
    got: dict[str, list] = {}
    roots = {}
    for way in ("put_message", "put_plain"):
        monkeypatch.setattr(commit_log_module, "time", StoreClock())
        root = roots[way] = tmp_path / way
        s = open_store(root, warm_ahead_enable=False)
        out = got[way] = []
        try:
            for f in messages:
                if way == "put_message":
                    r = s.put_message(MessageToStore(*f[:4], {}, *f[4:8], 0, *f[8:]))
                    assert r.status is PutMessageStatus.PUT_OK and r.flush_future is None
                    out.append((r.msg_ids[0], r.queue_offset))
                else:
                    r = s.put_plain(*f)
                    if isinstance(r, PutMessageResult):  # a topic's first put: put_message's way
                        assert r.status is PutMessageStatus.PUT_OK
                        r = (r.msg_ids[0], r.queue_offset)
                    out.append(r)
            assert s.put_count == len(messages)
        finally:
            s.shutdown()
    assert got["put_plain"] == got["put_message"]
    tuples = 0
    s = open_store(tmp_path / "count", warm_ahead_enable=False)
    try:
        for f in messages:
            tuples += s.put_plain(*f).__class__ is tuple
    finally:
        s.shutdown()
    assert tuples == len(messages) - 2  # all but the first of each topic
    assert_same_store_files(roots["put_message"], roots["put_plain"])


def test_records_read_back_indexed_and_announced(tmp_path):
    s = open_store(tmp_path)
    seen = []
    s.set_arrival_listener(lambda topic, qid, max_offset: seen.append((topic, qid, max_offset)))
    try:
        props = b"KEYS\x01order-7\x02UNIQ_KEY\x01AC1100020000000000000000000000AB\x02CLUSTER\x01C"
        first = s.put_plain("T", 2, b"one", 0, 0, 5, ("10.0.0.9", 1), 0, tag_hash_code("x"), props)
        assert isinstance(first, PutMessageResult) and first.ok
        msg_id, qoff = s.put_plain("T", 2, b"two", 1, 0, 6, ("10.0.0.9", 1), 1, 0, props)
        assert qoff == 1 and seen == [("T", 2, 1), ("T", 2, 2)]
        g = s.get_message("g", "T", 2, 0, 32, None)
        recs = [decode_record(b, verify_crc=True) for b in g.buffers]
        g.release()
        assert [bytes(r.body) for r in recs] == [b"one", b"two"]
        assert recs[1].offset_msg_id == msg_id and recs[1].reconsume_times == 1 and recs[1].flag == 1
        assert recs[1].properties["KEYS"] == "order-7"
        assert wait_for(lambda: s.dispatch_behind_bytes() == 0)
        for key in ("order-7", "AC1100020000000000000000000000AB"):
            q = s.query_message("T", key, 32, 0, 2**62)
            assert [decode_record(b).offset_msg_id for b in q.buffers] == [msg_id, first.msg_ids[0]]
            q.release()
    finally:
        s.shutdown()


def test_sync_flush_gets_put_messages_result_with_its_flush(tmp_path):
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    try:
        for _ in range(2):  # the second with the topic's bytes cached
            r = s.put_plain("T", 0, b"b", 0, 0, 1, ("127.0.0.1", 1), 0, 0, b"UNIQ_KEY\x01A")
            assert isinstance(r, PutMessageResult) and r.ok
            assert r.flush_future is not None or r.flush_offset
            if r.flush_future is not None:
                assert r.flush_future.result(10) is True
    finally:
        s.shutdown()


def test_refusals_and_failures_are_put_messages(tmp_path):
    s = open_store(tmp_path, disk_space_warning_level_ratio=90)
    used = [0.5]  # the disk's fill level as the store's cleaner reads it (the real disk is shared)
    s.clean._disk_usage = lambda path: used[0]
    s.clean.check_disk()
    try:
        ok = s.put_plain("T", 0, b"b", 0, 0, 1, ("127.0.0.1", 1), 0, 0, b"")
        assert isinstance(ok, PutMessageResult) and ok.ok  # the first put of a topic
        cases = [
            (("t" * 128, 0, b"b"), b"", PutMessageStatus.MESSAGE_ILLEGAL),
            (("T", 0, b"x" * 20000), b"", PutMessageStatus.MESSAGE_ILLEGAL),  # cached topic, append refuses
            (("T", 0, b"b"), b"P\x01" + b"v" * 40000, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED),
        ]
        for (topic, qid, body), props, status in cases:
            r = s.put_plain(topic, qid, body, 0, 0, 1, ("127.0.0.1", 1), 0, 0, props)
            assert isinstance(r, PutMessageResult) and r.status is status
        assert s.runtime_info()["putMessageFailedTimes"] == "3"
        used[0] = 0.95
        s.clean.check_disk()
        r = s.put_plain("T", 0, b"b", 0, 0, 1, ("127.0.0.1", 1), 0, 0, b"")
        assert isinstance(r, PutMessageResult) and r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        used[0] = 0.5
        s.clean.check_disk()
        assert s.put_plain("T", 0, b"b", 0, 0, 1, ("127.0.0.1", 1), 0, 0, b"")[1] == 1
    finally:
        s.shutdown()
    r = s.put_plain("T", 0, b"b", 0, 0, 1, ("127.0.0.1", 1), 0, 0, b"")
    assert isinstance(r, PutMessageResult) and r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_slave_refuses(tmp_path):
    s = open_store(tmp_path, broker_role="SLAVE")
    try:
        r = s.put_plain("T", 0, b"b", 0, 0, 1, ("127.0.0.1", 1), 0, 0, b"")
        assert isinstance(r, PutMessageResult) and r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        s.shutdown()
