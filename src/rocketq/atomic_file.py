"""Replacing a small file whole or not at all: written beside it under a temporary name, fsynced, renamed over
it, then the directory fsynced so the rename itself survives a power cut. Blocking: call it off the event
loop."""

from __future__ import annotations

import os
import tempfile


def replace_atomically(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    prefix: str,
    mode: int | None = None,
    backup: str | os.PathLike[str] | None = None,
) -> None:
    """Make ``path`` hold ``data``. ``mode``: the new file's permission bits (default: mkstemp's 0o600).
    ``backup``: once the new data is durable, the previous file is kept under this name (RocketMQ's .bak), so
    there is always one complete copy. On any failure before the rename the old file is untouched and no
    temporary file is left."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if backup is not None and os.path.exists(path):
            try:
                os.replace(path, backup)
            except OSError:
                pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # some file systems refuse a directory fsync; the rename has happened either way
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
