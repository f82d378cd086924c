"""One process per store: an exclusive flock on a `lock` file, held for the process's life.

Two brokers on one storePathRootDir both answer SEND_OK for records at the same CommitLog offsets, and the
second one's abnormal recovery and shutdown (it deletes the first one's abort file) hide the damage until a
restart loses acknowledged messages. RocketMQ refuses to start with "Lock failed, MQ already started"; so do
we, and the lock is taken before anything reads or writes the directory (no recovery, no abort file, no
config file is touched by the process that loses).

flock (not lockf): the lock belongs to the open file, so a second lock in the same process is refused too
(two embedded brokers in one interpreter), and the kernel drops it when the process dies, kill -9 included.
The holder's pid is written into the file for the error message only; the file's content is never trusted.
"""

from __future__ import annotations

import errno
import fcntl
import os

LOCK_FILE = "lock"
LOCK_FAILED = "Lock failed, MQ already started"


class StoreLocked(RuntimeError):
    """Another process (or another component of this one) holds the directory."""


class DirLock:
    """An exclusive lock on ``<directory>/<name>``; ``acquire`` raises StoreLocked when it is held."""

    def __init__(self, directory: str, name: str = LOCK_FILE) -> None:
        self.directory = os.path.abspath(directory)
        self.path = os.path.join(self.directory, name)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> DirLock:
        if self._fd is not None:
            return self
        os.makedirs(self.directory, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                by = f" by pid {holder}" if holder else ""
                raise StoreLocked(f"{LOCK_FAILED}: {self.directory} is in use{by}") from None
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is a courtesy for the error message; the lock is what counts
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # closing the only descriptor of the open file drops the flock

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def lock_store(root_dir: str, commitlog_dir: str | None = None) -> list[DirLock]:
    """Lock a broker store: its root and, when it lives elsewhere, its CommitLog directory (two brokers
    with different roots sharing one CommitLog directory would overwrite each other just the same)."""
    locks = [DirLock(root_dir).acquire()]
    if commitlog_dir:
        root = os.path.realpath(root_dir)
        cl = os.path.realpath(commitlog_dir)
        if cl != root and not cl.startswith(root + os.sep):
            try:
                locks.append(DirLock(commitlog_dir).acquire())
            except BaseException:
                locks[0].release()
                raise
    return locks
