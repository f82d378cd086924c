"""Queue allocation strategies (AllocateMessageQueueStrategy). Pure functions of sorted inputs.

Each strategy maps (group, this client id, all queues sorted, all client ids sorted) to the queues this
client consumes. Results match RocketMQ's implementations so that mixed Java/Python groups agree.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

from .message import MessageQueue

Strategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    if not current_cid:
        raise ValueError("currentCID is empty")
    return bool(mq_all) and current_cid in cid_all


def allocate_averagely(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Contiguous blocks; the first ``len(mq) % len(cid)`` clients get one extra queue."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = cid_all.index(current_cid)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


def allocate_averagely_by_circle(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Round-robin: client i gets queues i, i + n, i + 2n, ..."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = cid_all.index(current_cid)
    return list(mq_all[index :: len(cid_all)])


def _md5_hash(key: str) -> int:
    d = hashlib.md5(key.encode(), usedforsecurity=False).digest()
    return (d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]


def make_consistent_hash(virtual_node_count: int = 10) -> Strategy:
    """AllocateMessageQueueConsistentHash: clients on an MD5 ring with ``virtual_node_count`` replicas each;
    a queue goes to the first node clockwise from the hash of its ``str(MessageQueue)``."""
    if virtual_node_count < 0:
        raise ValueError("virtual_node_count must be >= 0")

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(virtual_node_count):
                ring[_md5_hash(f"{cid}-{i}")] = cid
        keys = sorted(ring)
        if not keys:
            return []
        out = []
        for mq in mq_all:
            h = _md5_hash(str(mq))
            pos = bisect.bisect_left(keys, h)
            node = ring[keys[pos % len(keys)]]
            if node == current_cid:
                out.append(mq)
        return out

    return allocate


allocate_consistent_hash = make_consistent_hash()


def make_by_config(queues: Sequence[MessageQueue]) -> Strategy:
    """AllocateMessageQueueByConfig: always the configured queues."""
    fixed = list(queues)

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(fixed)

    return allocate


STRATEGIES: dict[str, Strategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}


def resolve_strategy(strategy: str | Strategy | None) -> Strategy:
    if strategy is None:
        return allocate_averagely
    if callable(strategy):
        return strategy
    aliases = {
        "average": "AVG",
        "averagely": "AVG",
        "avg": "AVG",
        "average_by_circle": "AVG_BY_CIRCLE",
        "average-by-circle": "AVG_BY_CIRCLE",
        "circle": "AVG_BY_CIRCLE",
        "consistent_hash": "CONSISTENT_HASH",
        "consistent-hash": "CONSISTENT_HASH",
    }
    key = aliases.get(strategy.lower(), strategy.upper())
    try:
        return STRATEGIES[key]
    except KeyError:
        raise ValueError(f"unknown allocation strategy {strategy!r}") from None
