"""The slave's raw-append API (store/replica.py): a master's CommitLog bytes, chunked anyhow, rebuild a
byte-identical CommitLog with the same consume queues and index; bad chunks change nothing."""

from __future__ import annotations

import os
import random
import struct

import pytest
from store_helpers import msg, open_store, wait_for

from rocketq.protocol.properties import SCHEDULE_TOPIC
from rocketq.store import GetMessageStatus, MessageToStore
from rocketq.store.config import BrokerRole
from rocketq.store.replica import ReplicaError

SEG = 64 * 1024


def fill_master(s, n=300, seed=1):
    rng = random.Random(seed)
    for i in range(n):
        body = bytes([i % 251]) * rng.randrange(10, 3000)
        r = s.put_message(msg(topic=f"T{i % 3}", queue_id=i % 2, body=body, tags=f"tag{i % 4}", keys=f"k{i}"))
        assert r.ok


def chunks_of(s, start=None, rng=None, max_chunk=7000):
    """(phys, bytes) chunks of the master's log from start, cut at random sizes within segments."""
    rng = rng or random.Random(7)
    for mf in s.commit_log.mfq.files:
        lo = 0
        if start is not None:
            if mf.file_end_offset <= start:
                continue
            lo = max(0, start - mf.file_from_offset)
        hi = mf.wrote_position
        while lo < hi:
            n = min(hi - lo, rng.randrange(1, max_chunk))
            yield mf.file_from_offset + lo, bytes(mf.view[lo : lo + n])
            lo += n


def slave_store(root, **kw):
    return open_store(root, broker_role=BrokerRole.SLAVE, **kw)


def commitlog_bytes(s):
    return {os.path.basename(mf.path): bytes(mf.view) for mf in s.commit_log.mfq.files}


def queue_units(s):
    out = {}
    for key, cq in s.consume_queue_table.items():
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        out[key] = [cq.get_unit(i) for i in range(lo, hi)]
    return out


def test_replica_is_byte_identical_with_same_queues_and_index(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    try:
        fill_master(m)
        m.commit_log.flush_stage()
        app = sl.replica_appender()
        for phys, data in chunks_of(m):
            app.append(phys, data)
        assert app.pending == 0
        assert sl.max_phy_offset == m.max_phy_offset and len(m.commit_log.mfq.files) > 2
        assert commitlog_bytes(sl) == commitlog_bytes(m)
        assert queue_units(sl) == queue_units(m)
        assert sl.get_topic_queue_table() == m.get_topic_queue_table()
        assert wait_for(lambda: sl.dispatch_behind_bytes() == 0)
        q = sl.query_message("T1", "k10", 4, 0, 1 << 62)
        assert len(q.buffers) == 1
        q.release()
        g = sl.get_message("g", "T2", 1, 0, 8, None)
        assert g.status is GetMessageStatus.FOUND and g.message_count == 8
        g.release()
    finally:
        m.shutdown()
        sl.shutdown()
    # and the slave's log recovers like any other at restart
    sl = slave_store(tmp_path / "s")
    try:
        assert sl.max_phy_offset == m.max_phy_offset
    finally:
        sl.shutdown()


def test_partial_records_wait_for_their_rest(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    try:
        r1 = m.put_message(msg(body=b"a" * 500))
        r2 = m.put_message(msg(body=b"b" * 500))
        data = bytes(m.commit_log.mfq.files[0].view[: r2.wrote_offset + r2.wrote_bytes])
        app = sl.replica_appender()
        assert app.append(0, data[:3]) == 0 and app.pending == 3  # less than a size + magic
        assert app.append(3, data[3 : r1.wrote_bytes + 10]) == r1.wrote_bytes
        assert app.pending == 10 and app.received_end == r1.wrote_bytes + 10
        assert sl.get_max_offset_in_queue("T", 0) == 1
        app.drop_pending()  # a new connection resumes at the last whole record
        with pytest.raises(ReplicaError) as e:
            app.append(r1.wrote_bytes + 10, data[r1.wrote_bytes + 10 :])
        assert e.value.kind == "offset"
        assert app.append(r1.wrote_bytes, data[r1.wrote_bytes :]) == len(data)
        assert sl.get_max_offset_in_queue("T", 0) == 2
    finally:
        m.shutdown()
        sl.shutdown()


def test_empty_slave_starts_at_a_segment_boundary(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    try:
        fill_master(m, 120)
        last = m.commit_log.mfq.files[-1]
        assert last.file_from_offset > 0
        app = sl.replica_appender()
        with pytest.raises(ReplicaError) as e:
            app.append(last.file_from_offset + 100, b"x")
        assert e.value.kind == "offset" and not sl.commit_log.mfq.files
        for phys, data in chunks_of(m, start=last.file_from_offset):
            app.append(phys, data)
        assert sl.min_phy_offset == last.file_from_offset and sl.max_phy_offset == m.max_phy_offset
        assert bytes(sl.commit_log.mfq.files[0].view) == bytes(last.view)
        for key, units in queue_units(sl).items():  # queues start where the master's records say
            assert units == queue_units(m)[key][-len(units) :]
    finally:
        m.shutdown()
        sl.shutdown()


def test_bad_record_is_refused_and_nothing_past_the_last_good_one_moves(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    try:
        rs = [m.put_message(msg(body=b"%d" % i * 100)) for i in range(3)]
        data = bytearray(m.commit_log.mfq.files[0].view[: m.max_phy_offset])
        body_at = rs[1].wrote_offset + rs[1].wrote_bytes - 40  # inside the second record's body
        data[body_at] ^= 0xFF
        app = sl.replica_appender()
        with pytest.raises(ReplicaError) as e:
            app.append(0, bytes(data))
        assert e.value.kind == "record" and "CRC" in str(e.value)
        assert sl.max_phy_offset == rs[1].wrote_offset and app.pending == 0
        assert sl.get_max_offset_in_queue("T", 0) == 1
        # a record claiming another position (stale bytes) is refused too
        data[body_at] ^= 0xFF
        moved = bytearray(data[rs[1].wrote_offset :])
        struct.pack_into(">q", moved, 28, 12345)
        with pytest.raises(ReplicaError, match="says it is at 12345"):
            app.append(rs[1].wrote_offset, bytes(moved))
        assert app.append(rs[1].wrote_offset, bytes(data[rs[1].wrote_offset :])) == m.max_phy_offset
    finally:
        m.shutdown()
        sl.shutdown()


def test_segment_size_mismatch_is_named(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s", mapped_file_size_commitlog=2 * SEG)
    try:
        fill_master(m, 80)
        app = sl.replica_appender()
        with pytest.raises(ReplicaError) as e:
            for phys, data in chunks_of(m):
                app.append(phys, data)
        assert e.value.kind == "segment" and "mapedFileSizeCommitLog" in str(e.value)
    finally:
        m.shutdown()
        sl.shutdown()


def test_schedule_topic_units_carry_the_delivery_time(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    try:
        r = m.put_message(
            MessageToStore(topic=SCHEDULE_TOPIC, queue_id=2, body=b"later", properties={"DELAY": "3"})
        )
        assert r.ok
        for phys, data in chunks_of(m):
            sl.replica_appender().append(phys, data)
        assert queue_units(sl) == queue_units(m)
        unit = sl.find_consume_queue(SCHEDULE_TOPIC, 2).get_unit(0)
        assert unit[2] == r.store_timestamp + 10_000  # level 3 = 10 s
    finally:
        m.shutdown()
        sl.shutdown()


def test_arrival_listener_hears_each_extended_queue(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    heard = []
    sl.set_arrival_listener(lambda t, q, off: heard.append((t, q, off)))
    try:
        fill_master(m, 12)
        for phys, data in chunks_of(m, max_chunk=1 << 20):
            sl.replica_appender().append(phys, data)
        final = {}
        for t, q, off in heard:
            final[(t, q)] = off
        assert final == m.get_topic_queue_table()
    finally:
        m.shutdown()
        sl.shutdown()


def test_a_queue_unit_that_cannot_be_written_stops_the_chunk_there(tmp_path, monkeypatch):
    from rocketq.store.consume_queue import ConsumeQueue

    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    try:
        rs = [m.put_message(msg(body=b"%d" % i * 50)) for i in range(6)]
        data = bytes(m.commit_log.mfq.files[0].view[: m.max_phy_offset])
        real_put = ConsumeQueue.put

        def failing_put(self, phys, size, tags_code, qoff):
            return False if qoff == 3 else real_put(self, phys, size, tags_code, qoff)

        monkeypatch.setattr(ConsumeQueue, "put", failing_put)
        app = sl.replica_appender()
        with pytest.raises(ReplicaError) as e:
            app.append(0, data)
        assert e.value.kind == "io" and "unit 3 of consume queue" in str(e.value)
        assert sl.max_phy_offset == rs[3].wrote_offset and sl.get_max_offset_in_queue("T", 0) == 3
        monkeypatch.setattr(ConsumeQueue, "put", real_put)
        assert app.append(sl.max_phy_offset, data[sl.max_phy_offset :]) == m.max_phy_offset
        assert queue_units(sl) == queue_units(m)
    finally:
        m.shutdown()
        sl.shutdown()


def test_host_flags_longer_than_the_record_are_refused(tmp_path):
    m = open_store(tmp_path / "m")
    sl = slave_store(tmp_path / "s")
    try:
        r = m.put_message(msg(body=b""))  # the smallest record: 91 + topic + properties bytes
        data = bytearray(m.commit_log.mfq.files[0].view[: r.wrote_bytes])
        struct.pack_into(">i", data, 36, 0x30)  # born and store hosts claim IPv6: 24 more bytes
        struct.pack_into(">i", data, 0, r.wrote_bytes)
        with pytest.raises(ReplicaError) as e:
            sl.replica_appender().append(0, bytes(data))
        assert e.value.kind == "record" and "too short" in str(e.value) and sl.max_phy_offset == 0
    finally:
        m.shutdown()
        sl.shutdown()
