"""Interpreter settings for the broker processes (``rocketq broker`` / ``rocketq standalone``).

A broker is one asyncio loop plus store threads (group commit, flush, index dispatch, clean).
CPython lets a thread that holds the GIL keep it for up to the switch interval (5 ms default)
while another thread waits for it, so a store thread in a Python stretch can delay the event
loop's reply (or the group-commit thread's completion) by up to that much. A 0.5 ms interval
bounds that wait; measured on the 1-in-flight publish-ack tail (see the commit message).
Set in the entry point, not the controller: embedding processes (tests, apps) keep theirs.
"""

from __future__ import annotations

import os
import sys

SWITCH_INTERVAL_ENV = "ROCKETQ_SWITCH_INTERVAL_US"
DEFAULT_SWITCH_INTERVAL_US = 500


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
