"""Stateful property test: random puts/batches to many topic-queues, clean and crash restarts, reads — the
store must agree with an in-memory model (gapless offsets, same bodies, tag filtering)."""

from __future__ import annotations

import itertools
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from store_helpers import Tags, msg, open_store

from rocketq.protocol.record import decode_record
from rocketq.store import GetMessageStatus as S

TOPICS = ["A", "B", "%RETRY%g"]
QUEUES = [0, 1, 2]
TAGS = ["x", "y", None]
SMALL = dict(
    mapped_file_size_commitlog=16 * 1024,
    mapped_file_size_consume_queue=20 * 16,
    max_message_size=4096,
    flush_interval_commitlog=10,
    flush_interval_consume_queue=10,
)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = tempfile.mkdtemp(prefix="rq-stateful-")
        self.gen = itertools.count()
        self.root = f"{self.base}/{next(self.gen)}"
        self.store = open_store(self.root, **SMALL)
        self.model: dict[tuple[str, int], list[tuple[bytes, str | None]]] = {}

    def teardown(self) -> None:
        self.store.shutdown()
        shutil.rmtree(self.base, ignore_errors=True)

    @rule(
        topic=st.sampled_from(TOPICS),
        qid=st.sampled_from(QUEUES),
        body=st.binary(max_size=1500),
        tag=st.sampled_from(TAGS),
    )
    def put(self, topic, qid, body, tag):
        r = self.store.put_message(msg(topic=topic, queue_id=qid, body=body, tags=tag))
        assert r.ok
        q = self.model.setdefault((topic, qid), [])
        assert r.queue_offset == len(q)
        q.append((body, tag))

    @rule(
        topic=st.sampled_from(TOPICS),
        qid=st.sampled_from(QUEUES),
        bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=6),
        tag=st.sampled_from(TAGS),
    )
    def put_batch(self, topic, qid, bodies, tag):
        r = self.store.put_messages(
            topic, qid, [msg(topic=topic, queue_id=qid, body=b, tags=tag) for b in bodies]
        )
        assert r.ok and r.msg_num == len(bodies)
        q = self.model.setdefault((topic, qid), [])
        assert r.queue_offset == len(q)
        q.extend((b, tag) for b in bodies)

    @rule()
    def clean_restart(self):
        self.store.shutdown()
        self.store = open_store(self.root, **SMALL)
        assert not self.store.recovered_abnormally

    @rule()
    def crash_restart(self):
        # kill -9 image: the mapped files as the page cache holds them, with the abort file
        img = f"{self.base}/{next(self.gen)}"
        shutil.copytree(self.root, img, ignore=shutil.ignore_patterns("*.tmp"))  # racing the allocator
        self.store.shutdown()
        self.root = img
        self.store = open_store(self.root, **SMALL)
        assert self.store.recovered_abnormally

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def read(self, data):
        key = data.draw(st.sampled_from(sorted(self.model)))
        q = self.model[key]
        off = data.draw(st.integers(0, len(q) + 2))
        n = data.draw(st.integers(1, 40))
        r = self.store.get_message("g", key[0], key[1], off, n, None)
        if off < len(q):
            assert r.status is S.FOUND
            ms = [decode_record(b, verify_crc=True) for b in r.buffers]
            assert [m.queue_offset for m in ms] == list(range(off, off + len(ms)))
            assert [bytes(m.body) for m in ms] == [b for b, _ in q[off : off + len(ms)]]
            assert r.next_begin_offset == off + len(ms)
        elif off == len(q):
            assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_ONE, off)
        else:
            assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_BADLY, len(q))
        r.release()

    @precondition(lambda self: self.model)
    @rule(data=st.data(), tag=st.sampled_from(["x", "y"]))
    def read_filtered(self, data, tag):
        key = data.draw(st.sampled_from(sorted(self.model)))
        q = self.model[key]
        off = 0
        got = []
        while off < len(q):
            r = self.store.get_message("g", key[0], key[1], off, 32, Tags(tag))
            assert r.status in (S.FOUND, S.NO_MATCHED_MESSAGE)
            assert r.next_begin_offset > off
            got += [decode_record(b).queue_offset for b in r.buffers]
            off = r.next_begin_offset
            r.release()
        assert got == [i for i, (_, t) in enumerate(q) if t == tag]

    @invariant()
    def offsets_match_model(self):
        for (topic, qid), q in self.model.items():
            assert self.store.get_max_offset_in_queue(topic, qid) == len(q)
            assert self.store.get_min_offset_in_queue(topic, qid) == 0


TestStoreStateful = StoreMachine.TestCase
TestStoreStateful.settings = settings(max_examples=20, stateful_step_count=25, deadline=None)
