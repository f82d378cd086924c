"""Progress of long admin operations (a topic created on every broker of a cluster, offsets reset queue by
queue) on stderr, so stdout keeps mqadmin's output for scripts. Shown when stderr is a terminal, or with
ROCKETQ_PROGRESS=1; never more than 10 updates a second."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, what: str, total: int, unit: str = "", stream: TextIO | None = None) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.shown = os.environ.get("ROCKETQ_PROGRESS") == "1" or _is_tty(self.stream)
        self._last = 0.0

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.shown and (now - self._last >= 0.1 or self.done >= self.total):
            self._last = now
            unit = f" {self.unit}" if self.unit else ""
            self.stream.write(f"\r{self.what}: {self.done}/{self.total}{unit}")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
