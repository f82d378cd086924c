"""Power-loss simulation for tests: remember what the store made durable, build "after the power cut" images.

Off by default and free when off: the store only does
`if faultfs.ACTIVE is not None: faultfs.ACTIVE.on_...()`. It is switched on by the environment variable
ROCKETQ_FAULTFS=<shadow dir> (read at import, so a child process started with it records from its first write)
or by enable(shadow_dir) in-process.

Model (what ext4/xfs promise to a program that uses fsync/fdatasync/msync correctly):
  - on_create(path, size): a preallocated file exists with that size, reading as zeros until data is synced
    (we assume creation is durable: the journal covers metadata)
  - on_flush(path, start, end): bytes [start, end) as they are in the file now are durable
  - on_replace(src, dst) / on_delete(path): renames and deletions are durable
The recorder keeps a shadow copy of every durable byte under <shadow>/<absolute path>.
power_cut_image() copies the shadow of a directory elsewhere and adds a torn tail: a random prefix of the
bytes written but not yet synced, sometimes ending in a sector of garbage, which is what a disk may hold
after losing power mid-write (mode="prefix"); mode="pages" instead lets any subset of the dirty pages reach
the disk (write-back order is arbitrary), mixing sectors of the page in flight. Garbage only ever lands in
sectors past a file's synced end, so acknowledged (synced) data is never damaged by the model itself.
Crash points: ROCKETQ_CRASH_AT=<point>[:<n>] makes crash_point(<point>) call os._exit(137) at its n-th hit.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import threading

ENV_VAR = "ROCKETQ_FAULTFS"
SECTOR = 512


class FaultFS:
    def __init__(self, shadow_dir: str) -> None:
        self.shadow_dir = os.path.abspath(shadow_dir)
        os.makedirs(self.shadow_dir, exist_ok=True)
        self._lock = threading.Lock()
        self.synced_end: dict[str, int] = {}  # path -> highest durable byte + 1 (for torn tails)
        self.flush_calls = 0

    def shadow_path(self, path: str) -> str:
        return os.path.join(self.shadow_dir, os.path.abspath(path).lstrip("/"))

    # ---------------------------------------------------------------- hooks (called by the store)
    def on_create(self, path: str, size: int) -> None:
        sp = self.shadow_path(path)
        with self._lock:
            os.makedirs(os.path.dirname(sp), exist_ok=True)
            with open(sp, "wb") as f:
                f.truncate(size)
            self.synced_end[os.path.abspath(path)] = 0

    def on_flush(self, path: str, start: int, end: int) -> None:
        """[start, end) of path is durable now. Copies those bytes from the live file into the shadow."""
        if end <= start:
            return
        ap = os.path.abspath(path)
        sp = self.shadow_path(ap)
        with self._lock:
            self.flush_calls += 1
            fd = os.open(ap, os.O_RDONLY)
            try:
                data = os.pread(fd, end - start, start)
            finally:
                os.close(fd)
            os.makedirs(os.path.dirname(sp), exist_ok=True)
            sfd = os.open(sp, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(sfd, data, start)
            finally:
                os.close(sfd)
            if start + len(data) > self.synced_end.get(ap, 0):
                self.synced_end[ap] = start + len(data)

    def on_file_synced(self, path: str) -> None:
        """A small file was written whole and fsynced (checkpoint, config JSON)."""
        ap = os.path.abspath(path)
        sp = self.shadow_path(ap)
        with self._lock:
            os.makedirs(os.path.dirname(sp), exist_ok=True)
            shutil.copyfile(ap, sp)
            self.synced_end[ap] = os.path.getsize(ap)

    def on_replace(self, src: str, dst: str) -> None:
        """os.replace(src, dst) happened after src was synced (atomic-rename pattern)."""
        with self._lock:
            ssrc, sdst = self.shadow_path(src), self.shadow_path(dst)
            if os.path.exists(ssrc):
                os.makedirs(os.path.dirname(sdst), exist_ok=True)
                os.replace(ssrc, sdst)
                self.synced_end[os.path.abspath(dst)] = self.synced_end.pop(os.path.abspath(src), 0)

    def on_delete(self, path: str) -> None:
        with self._lock:
            try:
                os.remove(self.shadow_path(path))
            except FileNotFoundError:
                pass
            self.synced_end.pop(os.path.abspath(path), None)

    # ---------------------------------------------------------------- test side
    def power_cut_image(
        self,
        live_dir: str,
        dest_dir: str,
        rng: random.Random | None = None,
        max_torn_bytes: int = 64 * 1024,
        garbage: bool = True,
        mode: str = "prefix",
    ) -> None:
        """Write to dest_dir what live_dir would contain after a power cut now (see module doc). Call it
        after the writer process is dead (SIGKILL) so the live files no longer change. Only bytes that
        differ from the synced state can be torn (a file nobody was writing keeps its synced content)."""
        rng = rng or random.Random()
        src_root = self.shadow_path(live_dir)
        if os.path.exists(dest_dir):
            shutil.rmtree(dest_dir)
        if os.path.isdir(src_root):
            shutil.copytree(src_root, dest_dir)
        else:
            os.makedirs(dest_dir)
        self._reload_synced_ends(live_dir)
        # files the store never reported (e.g. the abort marker, created without fsync): the directory entry
        # survives (journaled metadata) but not their data, the classic zero-length file after a crash
        for dirpath, _dirs, files in os.walk(live_dir):
            for name in files:
                out = os.path.join(dest_dir, os.path.relpath(os.path.join(dirpath, name), live_dir))
                if not os.path.exists(out):
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    open(out, "wb").close()
        if mode == "pages":
            self._tear_pages(live_dir, dest_dir, rng, garbage)
            return
        for ap, synced in self.synced_end.items():
            if not ap.startswith(os.path.abspath(live_dir) + os.sep) or not os.path.exists(ap):
                continue
            rel = os.path.relpath(ap, os.path.abspath(live_dir))
            out = os.path.join(dest_dir, rel)
            if not os.path.exists(out):
                continue
            size = os.path.getsize(ap)
            room = min(max_torn_bytes, size - synced)
            if room <= 0:
                continue
            with open(ap, "rb") as f:
                f.seek(synced)
                live_tail = f.read(room)
            with open(out, "rb") as f:
                f.seek(synced)
                old_tail = f.read(room).ljust(len(live_tail), b"\0")
            # only bytes that were written after the last sync can tear: stop at the last dirty byte
            dirty_end = len(live_tail)
            while dirty_end > 0 and live_tail[dirty_end - 1] == old_tail[dirty_end - 1]:
                dirty_end -= 1
            if dirty_end == 0:
                continue
            n = rng.randint(0, dirty_end)
            if n == 0:
                continue
            tail = bytearray(live_tail[:n])
            if garbage and rng.random() < 0.5:
                # the sector being written when power failed holds neither old nor new data
                k = min(len(tail), rng.randint(1, SECTOR))
                tail[-k:] = rng.randbytes(k)
            with open(out, "r+b") as f:
                f.seek(synced)
                f.write(tail)

    def _tear_pages(self, live_dir: str, dest_dir: str, rng: random.Random, garbage: bool) -> None:
        """mode="pages": the kernel writes dirty pages back in any order, so after the cut every page that
        differs from its synced state holds the old or the new content, and the page being written when power
        failed may mix old and new sectors (sectors are atomic). With garbage=True a sector that lies wholly
        past the file's synced end (data never acknowledged) may also hold garbage. Covers in-place files
        (checkpoint, index) too."""
        root = os.path.abspath(live_dir)
        page = 4096
        for ap, synced in list(self.synced_end.items()):
            if not ap.startswith(root + os.sep) or not os.path.exists(ap):
                continue
            out = os.path.join(dest_dir, os.path.relpath(ap, root))
            if not os.path.exists(out):
                continue
            with open(ap, "rb") as f:
                live = f.read()
            with open(out, "rb") as f:
                img = bytearray(f.read().ljust(len(live), b"\0"))
            for pos in range(0, len(live), page):
                new = live[pos : pos + page]
                if new == img[pos : pos + len(new)]:
                    continue
                r = rng.random()
                if r < 0.45:
                    continue  # write-back of this page never started
                if r < 0.9:
                    img[pos : pos + len(new)] = new
                    continue
                for sp in range(pos, pos + len(new), SECTOR):  # the page in flight: sector by sector
                    if rng.random() < 0.5:
                        img[sp : sp + SECTOR] = live[sp : sp + SECTOR]
                    elif garbage and sp >= synced and rng.random() < 0.3:
                        img[sp : sp + SECTOR] = rng.randbytes(min(SECTOR, len(live) - sp))
            with open(out, "wb") as f:
                f.write(img)

    def _reload_synced_ends(self, live_dir: str) -> None:
        """synced_end lives in the writer's memory; when the writer was another process, persist it via the
        journal file it appends (see _journal)."""
        jp = os.path.join(self.shadow_dir, "_synced_ends")
        if not os.path.exists(jp):
            return
        with open(jp) as f:
            for line in f:
                parts = line.rstrip("\n").rsplit(" ", 1)
                if len(parts) != 2:
                    continue
                path, end = parts
                if end == "-":
                    self.synced_end.pop(path, None)
                else:
                    e = int(end)
                    if e > self.synced_end.get(path, -1):
                        self.synced_end[path] = e


class _JournalingFaultFS(FaultFS):
    """FaultFS used across processes: also appends every change of synced_end to <shadow>/_synced_ends so
    the test
    process can build the torn tail after the writer was killed."""

    def __init__(self, shadow_dir: str) -> None:
        super().__init__(shadow_dir)
        self._journal = open(os.path.join(self.shadow_dir, "_synced_ends"), "a", buffering=1)  # noqa: SIM115

    def _note(self, path: str) -> None:
        ap = os.path.abspath(path)
        end = self.synced_end.get(ap)
        self._journal.write(f"{ap} {'-' if end is None else end}\n")

    def on_create(self, path: str, size: int) -> None:
        super().on_create(path, size)
        self._note(path)

    def on_flush(self, path: str, start: int, end: int) -> None:
        super().on_flush(path, start, end)
        self._note(path)

    def on_file_synced(self, path: str) -> None:
        super().on_file_synced(path)
        self._note(path)

    def on_replace(self, src: str, dst: str) -> None:
        super().on_replace(src, dst)
        self._note(src)
        self._note(dst)

    def on_delete(self, path: str) -> None:
        super().on_delete(path)
        self._note(path)


ACTIVE: FaultFS | None = None


def enable(shadow_dir: str, journal: bool = False) -> FaultFS:
    global ACTIVE
    ACTIVE = _JournalingFaultFS(shadow_dir) if journal else FaultFS(shadow_dir)
    return ACTIVE


def disable() -> None:
    global ACTIVE
    ACTIVE = None


def open_recorder(shadow_dir: str) -> FaultFS:
    """Test side: a FaultFS over a shadow dir written by another (dead) process, for power_cut_image()."""
    return FaultFS(shadow_dir)


# ---------------------------------------------------------------- fallback: record without store cooperation
_orig: dict[str, object] = {}


def install_patches() -> None:
    """Record durability without explicit hooks: wrap os.fsync / os.fdatasync (whole file durable) and
    mmap.mmap.flush (range durable). Used when the store code does not call the hooks itself. Only for
    tests."""
    import mmap as _mmap

    if _orig:
        return
    fs = ACTIVE
    if fs is None:
        raise RuntimeError("enable() first")

    def _fd_path(fd: int) -> str | None:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None

    def _wrap_sync(name: str):
        orig = getattr(os, name)

        def synced(fd: int) -> None:
            orig(fd)
            p = _fd_path(fd)
            if p and os.path.isfile(p) and ACTIVE is not None:
                ACTIVE.on_flush(p, 0, os.fstat(fd).st_size)

        _orig[name] = orig
        setattr(os, name, synced)

    _wrap_sync("fsync")
    _wrap_sync("fdatasync")

    base = _mmap.mmap

    class RecordingMmap(base):  # type: ignore[misc, valid-type]
        def __new__(cls, fileno, length, *args, **kwargs):
            self = super().__new__(cls, fileno, length, *args, **kwargs)
            self._rq_path = _fd_path(fileno) if fileno >= 0 else None
            return self

        def flush(self, *args):  # type: ignore[override]
            r = super().flush(*args)
            if self._rq_path and ACTIVE is not None:
                if args:
                    off = args[0]
                    size = args[1] if len(args) > 1 else len(self) - off
                else:
                    off, size = 0, len(self)
                ACTIVE.on_flush(self._rq_path, off, off + size)
            return r

    _orig["mmap"] = base
    _mmap.mmap = RecordingMmap  # type: ignore[misc]


def uninstall_patches() -> None:
    import mmap as _mmap

    for name in ("fsync", "fdatasync"):
        if name in _orig:
            setattr(os, name, _orig.pop(name))
    if "mmap" in _orig:
        _mmap.mmap = _orig.pop("mmap")  # type: ignore[misc]


def simulate_enospc(path: str) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


# ---------------------------------------------------------------- crash points
CRASH_ENV = "ROCKETQ_CRASH_AT"  # "<point>" or "<point>:<n>": die at the n-th time the point is reached
CRASH_EXIT_CODE = 137
CRASH_AT: str | None = None
_crash_after = 1
_crash_hits = 0


def set_crash_point(spec: str | None) -> None:
    global CRASH_AT, _crash_after, _crash_hits
    _crash_hits = 0
    if not spec:
        CRASH_AT, _crash_after = None, 1
        return
    name, _, n = spec.partition(":")
    CRASH_AT, _crash_after = name, int(n) if n else 1


def crash_point(name: str) -> None:
    """Die like a power-less process (no cleanup, no flush) when `name` is the armed crash point. Store code:
    `if faultfs.CRASH_AT is not None: faultfs.crash_point("commitlog.after_append")`."""
    global _crash_hits
    if name != CRASH_AT:
        return
    _crash_hits += 1
    if _crash_hits >= _crash_after:
        os._exit(CRASH_EXIT_CODE)


if os.environ.get(ENV_VAR):
    enable(os.environ[ENV_VAR], journal=True)
if os.environ.get(CRASH_ENV):
    set_crash_point(os.environ[CRASH_ENV])
