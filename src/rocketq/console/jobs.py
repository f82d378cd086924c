"""Long admin operations (delete a topic everywhere, resend a batch of DLQ messages, reset offsets on every
broker) run as jobs: the request answers at once with a job id, the page polls /api/jobs/{id} and shows the
progress (steps done of total, one line per step). Finished jobs are kept for a while, bounded in number."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rocketq.admin import AdminError

log = logging.getLogger("rocketq.console")

MAX_JOBS = 100
MAX_LINES = 500


@dataclass(slots=True)
class Job:
    id: str
    title: str
    user: str | None
    total: int = 0
    done: int = 0
    failed: int = 0
    state: str = "running"  # running | done | failed
    lines: list[str] = field(default_factory=list)
    result: Any = None
    error: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None

    def step(self, line: str, ok: bool = True) -> None:
        """One unit of work finished (or failed), with a line saying what."""
        self.done += 1
        if not ok:
            self.failed += 1
        self.log(line)

    def log(self, line: str) -> None:
        if len(self.lines) < MAX_LINES:
            self.lines.append(line)
        elif len(self.lines) == MAX_LINES:
            self.lines.append("... (more lines left out)")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "user": self.user,
            "total": self.total,
            "done": self.done,
            "failed": self.failed,
            "state": self.state,
            "lines": self.lines,
            "result": self.result,
            "error": self.error,
            "started": int(self.started * 1000),
            "finished": int(self.finished * 1000) if self.finished else None,
        }


class Jobs:
    def __init__(self) -> None:
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def start(
        self, title: str, total: int, work: Callable[[Job], Awaitable[Any]], user: str | None = None
    ) -> Job:
        job = Job(f"{int(time.time())}-{next(self._ids)}", title, user, total)
        self._jobs[job.id] = job
        while len(self._jobs) > MAX_JOBS:
            oldest = next(iter(self._jobs.values()))
            if oldest.state == "running":
                break
            self._jobs.popitem(last=False)

        async def run() -> None:
            try:
                job.result = await work(job)
                job.state = "failed" if job.failed and job.failed == job.done else "done"
            except Exception as exc:
                job.state = "failed"
                job.error = str(exc) or exc.__class__.__name__
                job.log(f"failed: {job.error}")
                if not isinstance(exc, (AdminError, OSError, ValueError)):  # else: a refusal, said in the job
                    log.exception("console job %s (%s) failed", job.id, title)
            finally:
                job.finished = time.time()

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
