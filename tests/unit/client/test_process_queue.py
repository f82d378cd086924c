"""Offset math of the process queue: the committed offset is the smallest unconsumed one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.message import MessageExt
from rocketq.client.process_queue import ProcessQueue


def msg(offset: int, size: int = 10) -> MessageExt:
    m = MessageExt("T", b"x" * size)
    m.queue_offset = offset
    return m


def test_commit_offset_is_smallest_in_flight() -> None:
    pq = ProcessQueue()
    ms = [msg(i) for i in range(10)]
    assert pq.remove_messages(ms[:1]) == -1  # nothing in flight yet
    assert pq.put_messages(ms) == 10
    assert pq.msg_count == 10 and pq.msg_size == 100
    assert pq.remove_messages([ms[3], ms[4]]) == 0  # 0 still in flight
    assert pq.remove_messages([ms[0]]) == 1
    assert pq.remove_messages([ms[1], ms[2]]) == 5
    assert pq.remove_messages([ms[7]]) == 5
    assert pq.max_span() == 9 - 5
    assert pq.remove_messages(ms[5:]) == 10  # all done: one past the largest pulled
    assert pq.msg_count == 0 and pq.msg_size == 0
    assert pq.max_span() == 0


def test_duplicates_are_not_counted_twice() -> None:
    pq = ProcessQueue()
    assert pq.put_messages([msg(5), msg(6)]) == 2
    assert pq.put_messages([msg(6), msg(7)]) == 1
    assert pq.msg_count == 3
    assert pq.remove_messages([msg(6), msg(6)]) == 5
    assert pq.msg_count == 2


def test_orderly_take_commit_and_rollback() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(i) for i in range(20, 25)])
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [20, 21]
    pq.make_messages_to_consume_again(taken)
    again = pq.take_messages(3)
    assert [m.queue_offset for m in again] == [20, 21, 22]
    assert pq.commit() == 23
    assert pq.msg_count == 2
    assert pq.commit() == -1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("pull", "old", "remove", "take", "again", "commit", "clear")),
            st.integers(0, 40),
            st.integers(1, 8),
        ),
        max_size=60,
    )
)
def test_offsets_match_a_reference_model(ops: list[tuple[str, int, int]]) -> None:
    """In-order pulls, out-of-order adds, removals, orderly take/rollback/commit and clear against a plain
    dict model: the smallest in-flight offset, counts and sizes always agree."""
    pq = ProcessQueue()
    tree: dict[int, int] = {}
    consuming: dict[int, MessageExt] = {}
    top = -1
    for op, a, k in ops:
        if op == "pull":
            batch = [msg(top + 1 + i, size=a) for i in range(k)]
            pq.put_messages(batch)
            tree.update((m.queue_offset, a) for m in batch)
            top += k
        elif op == "old":  # re-delivered or older offsets, some already in flight (none taken by orderly)
            batch = [msg(o, size=3) for o in range(max(0, a - k), a) if o not in consuming]
            pq.put_messages(batch)
            for m in batch:
                tree.setdefault(m.queue_offset, 3)
                top = max(top, m.queue_offset)
        elif op == "remove":
            gone = [msg(o) for o in sorted(tree)[a % 3 :: 2][:k]]
            r = pq.remove_messages(gone)
            had = bool(tree)
            for m in gone:
                tree.pop(m.queue_offset, None)
            assert r == (-1 if not had else (min(tree) if tree else pq.queue_offset_max + 1))
        elif op == "take":
            taken = pq.take_messages(k)
            want = sorted(tree)[:k]
            assert [m.queue_offset for m in taken] == want
            for m in taken:
                consuming[m.queue_offset] = m
                tree.pop(m.queue_offset)
        elif op == "again":
            back = list(consuming.values())
            pq.make_messages_to_consume_again(back)
            for m in back:
                tree[m.queue_offset] = len(m.body)
            consuming.clear()
        elif op == "commit":
            assert pq.commit() == (max(consuming) + 1 if consuming else -1)
            consuming.clear()
        else:
            pq.clear()
            tree.clear()
            consuming.clear()
        if tree:
            assert pq.first_message().queue_offset == min(tree)  # type: ignore[union-attr]
            assert pq.max_span() == pq.queue_offset_max - min(tree)
        else:
            assert pq.first_message() is None
        assert pq.msg_count == len(tree) + len(consuming)
        assert pq.msg_size == sum(tree.values()) + sum(len(m.body) for m in consuming.values())
