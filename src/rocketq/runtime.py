"""Interpreter settings for the broker processes (``rocketq broker`` / ``rocketq standalone``).

A broker is one asyncio loop plus store threads (group commit, flush, index dispatch, clean).
CPython lets a thread that holds the GIL keep it for up to the switch interval (5 ms default)
while another thread waits for it, so a store thread in a Python stretch can delay the event
loop's reply (or the group-commit thread's completion) by up to that much. Measured with 1 in
flight: 0.5 ms lowered the publish-ack p99 under CPU contention from other processes but raised
tier A (SYNC_FLUSH) p50/p99 by ~5-10 % on a quiet machine (more forced GIL hand-offs between the
loop and the group-commit thread on one CPU), so the default keeps Python's interval.
Set in the entry point, not the controller: embedding processes (tests, apps) keep theirs.
"""

from __future__ import annotations

import os
import sys

SWITCH_INTERVAL_ENV = "ROCKETQ_SWITCH_INTERVAL_US"
DEFAULT_SWITCH_INTERVAL_US = 0  # 0: Python's own (5 ms)


def switch_interval_us(env: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The configured interval in µs; 0 (or a negative / unparsable value) keeps Python's default."""
    raw = env.get(SWITCH_INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_SWITCH_INTERVAL_US
    try:
        return max(int(raw), 0)
    except ValueError:
        return 0


def apply_broker_runtime() -> float:
    """Apply the broker's interpreter settings; returns the switch interval in effect (s)."""
    us = switch_interval_us()
    if us > 0:
        sys.setswitchinterval(us / 1e6)
    return sys.getswitchinterval()
