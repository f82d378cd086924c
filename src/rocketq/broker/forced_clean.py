"""What a forced clean cost each consumer group.

Above diskSpaceCleanForciblyRatio (85 %) the store deletes CommitLog segments before fileReservedTime, as
RocketMQ does (store/cleanup.py). The store knows which queues lost which offsets; the broker knows where
each group stands. Here the two meet: for every group with a committed offset in a queue that lost
messages, the messages it had not consumed yet are counted (BrokerStats.forced_clean_unconsumed, in the
runtime info) and logged per group. Runs on the event loop (the offsets table's thread).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .offset_manager import SEP

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger(__name__)

_LOGGED_GROUPS = 20


def unconsumed_per_group(
    offsets: dict[str, dict[int, int]], lost: dict[tuple[str, int], tuple[int, int]]
) -> dict[str, dict[str, int]]:
    """group -> topic -> messages deleted at offsets the group had not consumed yet. ``lost``: (topic, queue)
    -> (min offset before, min offset after) of the queues that lost messages."""
    out: dict[str, dict[str, int]] = {}
    for key, queues in list(offsets.items()):
        topic, _, group = key.partition(SEP)
        for qid, committed in list(queues.items()):
            span = lost.get((topic, qid))
            if span is None:
                continue
            old_min, new_min = span
            n = new_min - max(committed, old_min)
            if n > 0:
                per_topic = out.setdefault(group, {})
                per_topic[topic] = per_topic.get(topic, 0) + n
    return out


def watch(ctl: BrokerContext) -> None:
    """Have the store's clean service report forced cleans to the broker (from its thread to the loop)."""
    clean = getattr(ctl.store, "clean", None)
    if clean is None:
        return
    loop = ctl.loop

    def on_forced_clean(paths: list[str], lost: dict[tuple[str, int], tuple[int, int]]) -> None:
        loop.call_soon_threadsafe(report, ctl, paths, lost)

    clean.on_forced_clean = on_forced_clean


def report(ctl: BrokerContext, paths: list[str], lost: dict[tuple[str, int], tuple[int, int]]) -> None:
    per_group = unconsumed_per_group(ctl.offsets.table, lost)
    total = sum(sum(t.values()) for t in per_group.values())
    ctl.stats.forced_clean_unconsumed += total
    if not per_group:
        log.warning("forced clean: no consumer group had unconsumed messages in the deleted segments")
        return
    ranked = sorted(per_group.items(), key=lambda kv: -sum(kv[1].values()))
    for group, topics in ranked[:_LOGGED_GROUPS]:
        detail = ", ".join(f"{t} {n}" for t, n in sorted(topics.items()))
        log.warning(
            "forced clean: consumer group %s lost %d acknowledged messages it had not consumed (%s)",
            group, sum(topics.values()), detail,
        )  # fmt: skip
    if len(ranked) > _LOGGED_GROUPS:
        rest = sum(sum(t.values()) for _, t in ranked[_LOGGED_GROUPS:])
        more = len(ranked) - _LOGGED_GROUPS
        log.warning("forced clean: %d more groups lost %d unconsumed messages", more, rest)
