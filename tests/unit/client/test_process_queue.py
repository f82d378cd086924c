"""Offset math of the process queue: the committed offset is the smallest unconsumed one."""

from __future__ import annotations

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
