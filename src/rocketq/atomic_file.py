"""Replacing a small file whole or not at all: written beside it under a temporary name, fsynced, renamed over
it, then the directory fsynced so the rename itself survives a power cut. Blocking: call it off the event
loop."""

from __future__ import annotations

import os
import tempfile


def replace_atomically(
    path: str | os.PathLike[str], data: bytes, *, prefix: str, mode: int | None = None
) -> None:
    """Make ``path`` hold ``data``. ``mode``: the new file's permission bits (default: mkstemp's 0o600).
    On any failure the old file is untouched and no temporary file is left."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
