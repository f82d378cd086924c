"""Where the broker's time goes: py-spy record (raw, --threads) on the server pid while the load generator
runs a closed-loop cell, folded into busy samples per thread and the hottest frames (idle waits dropped)."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from typing import Any

IDLE_LEAVES = ("Condition.wait", "Event.wait", "sleep", "select", "_wait (")
PLUMBING = (
    "<module>",
    "_run_code",
    "_run_module_as_main",
    "Thread._bootstrap",
    "Thread.run",
    "main (",
    "_run (",
    "run (",
    "Runner.run",
)


def py_spy() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.path.exists(here) else shutil.which("py-spy")


def start(pid: int, seconds: float, out: str, rate: int = 200) -> subprocess.Popen[bytes] | None:
    exe = py_spy()
    if exe is None:
        return None
    cmd = [
        exe,
        "record",
        "-p",
        str(pid),
        "-r",
        str(rate),
        "-d",
        str(max(1, int(seconds))),
        "-f",
        "raw",
        "-o",
        out,
        "--threads",
        "--nonblocking",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _short(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py:123)"
    name, _, where = frame.partition(" (")
    parts = where.rstrip(")").split("/")
    return f"{name} ({'/'.join(parts[-2:])})" if where else name


def fold(path: str, top: int = 15) -> dict[str, Any]:
    threads: collections.Counter[str] = collections.Counter()
    self_c: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, n_s = line.rstrip().rpartition(" ")
            if not stack:
                continue
            n = int(n_s)
            frames = stack.split(";")
            if len(frames) < 2 or frames[-1].startswith(IDLE_LEAVES):  # no Python frame, or waiting
                continue
            total += n
            threads[frames[0].split(": ", 1)[-1]] += n
            self_c[_short(frames[-1])] += n
            for fr in {_short(x) for x in frames[1:]}:
                if not fr.startswith(PLUMBING):
                    incl[fr] += n
    if not total:
        return {"busy_samples": 0}
    pct = lambda c: [(k, round(100 * v / total, 1)) for k, v in c.most_common(top)]  # noqa: E731
    return {"busy_samples": total, "threads": pct(threads), "self": pct(self_c), "incl": pct(incl)}
