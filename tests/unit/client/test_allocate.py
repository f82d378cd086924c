"""Allocation strategies against RocketMQ's documented results."""

from __future__ import annotations

import pytest

from rocketq.client.allocate import (
    allocate_averagely,
    allocate_averagely_by_circle,
    make_by_config,
    make_consistent_hash,
    resolve_strategy,
)
from rocketq.client.message import MessageQueue


def mqs(n: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def ids(result: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in result]


CIDS = [f"CID{i}" for i in range(4)]


@pytest.mark.parametrize(
    ("n_mq", "n_cid", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (4, 4, [[0], [1], [2], [3]]),
        (2, 3, [[0], [1], []]),
        (4, 1, [[0, 1, 2, 3]]),
    ],
)
def test_averagely(n_mq: int, n_cid: int, expected: list[list[int]]) -> None:
    cids = CIDS[:n_cid] if n_cid <= 4 else [f"C{i}" for i in range(n_cid)]
    got = [ids(allocate_averagely("G", c, mqs(n_mq), cids)) for c in cids]
    assert got == expected


@pytest.mark.parametrize(
    ("n_mq", "n_cid", "expected"),
    [
        (8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]),
        (2, 3, [[0], [1], []]),
        (5, 2, [[0, 2, 4], [1, 3]]),
    ],
)
def test_averagely_by_circle(n_mq: int, n_cid: int, expected: list[list[int]]) -> None:
    cids = CIDS[:n_cid]
    got = [ids(allocate_averagely_by_circle("G", c, mqs(n_mq), cids)) for c in cids]
    assert got == expected


def test_unknown_client_gets_nothing_and_empty_cid_is_an_error() -> None:
    assert allocate_averagely("G", "other", mqs(4), CIDS) == []
    assert allocate_averagely("G", "CID0", [], CIDS) == []
    with pytest.raises(ValueError):
        allocate_averagely("G", "", mqs(4), CIDS)


@pytest.mark.parametrize("n_cid", [1, 2, 3, 4])
def test_consistent_hash_partitions_every_queue_once(n_cid: int) -> None:
    strategy = make_consistent_hash()
    queues = mqs(16) + mqs(8, broker="broker-b")
    cids = CIDS[:n_cid]
    parts = [strategy("G", c, queues, cids) for c in cids]
    flat = [mq for p in parts for mq in p]
    assert sorted(flat) == sorted(queues)
    assert len(set(flat)) == len(flat)


def test_consistent_hash_moves_few_queues_when_a_client_joins() -> None:
    strategy = make_consistent_hash(virtual_node_count=10)
    queues = mqs(64)
    before = {mq: c for c in CIDS[:3] for mq in strategy("G", c, queues, CIDS[:3])}
    after = {mq: c for c in CIDS for mq in strategy("G", c, queues, CIDS)}
    moved = [mq for mq in queues if before[mq] != after[mq]]
    # only queues taken over by the new client move
    assert all(after[mq] == "CID3" for mq in moved)
    assert len(moved) < len(queues)


def test_consistent_hash_is_deterministic_md5_ring() -> None:
    # the same inputs give the same result in any process (no Python hash randomisation)
    a = make_consistent_hash()("G", "CID1", mqs(12), CIDS)
    b = make_consistent_hash()("G", "CID1", list(reversed(mqs(12))), CIDS)
    assert sorted(a) == sorted(b)


def test_by_config_and_resolve() -> None:
    chosen = [MessageQueue("T", "broker-a", 3)]
    assert make_by_config(chosen)("G", "CID0", mqs(4), CIDS) == chosen
    assert resolve_strategy(None) is allocate_averagely
    assert resolve_strategy("average-by-circle") is allocate_averagely_by_circle
    assert resolve_strategy("AVG") is allocate_averagely
    with pytest.raises(ValueError):
        resolve_strategy("nope")
