"""Linux native AIO, only for fdatasync: io_submit(IOCB_CMD_FDSYNC) with completion signalled on an eventfd.

Why: under SYNC_FLUSH every acknowledgement waits for an fdatasync. Run in a Python thread, each round costs
GIL hand-offs and thread wake-ups on both sides (bench/aio_fsync_bench.py). Submitted here, the kernel runs
the fdatasync on one of its own workers and the event loop learns of the completion from the eventfd, which
it watches like a socket: no Python thread is involved. Kernel support for IOCB_CMD_FDSYNC dates from
Linux 4.18; probe() says whether this kernel and file system take it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

IOCB_CMD_FDSYNC = 3
IOCB_FLAG_RESFD = 1  # write the completion count to aio_resfd (an eventfd)

# struct iocb (64 bytes, little-endian layout): aio_data, aio_key, aio_rw_flags, aio_lio_opcode, aio_reqprio,
# aio_fildes, aio_buf, aio_nbytes, aio_offset, aio_reserved2, aio_flags, aio_resfd
_IOCB = struct.Struct("<QIIHhIQQqQII")
# struct io_event (32 bytes): data, obj, res, res2
_EVENT = struct.Struct("<QQqq")

# (io_setup, io_destroy, io_submit, io_getevents) syscall numbers
_SYSCALLS = {"x86_64": (206, 207, 209, 208), "aarch64": (0, 1, 2, 4)}
_SCHED_YIELD = {"x86_64": 24, "aarch64": 124}

# The completion ring the kernel maps at the context's address (struct aio_ring): id, nr, head, tail, magic,
# compat_features, incompat_features, header_length, then nr io_events. Completions are read from it
# without io_getevents (as libaio does) where its layout is this one and loads are not reordered (x86-64:
# the kernel writes an event, then tail, and we read tail, then the event).
AIO_RING_MAGIC = 0xA10A10A1
_RING_HEADER = struct.Struct("<8I")
_HEAD_TAIL = struct.Struct("<II")
_U32 = struct.Struct("<I")
_RING_ARCHES = ("x86_64",)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _libc_syscall(release_gil: bool = True):
    if struct.pack("=H", 1) != b"\x01\x00":
        return None  # the iocb layout above is the little-endian one
    try:
        lib = ctypes.CDLL(None, use_errno=True) if release_gil else ctypes.PyDLL(None, use_errno=True)
        fn = lib.syscall
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_long
    return fn


_syscall = _libc_syscall()  # calls that may block (io_getevents with a wait, io_destroy)
# io_submit of fdatasyncs and a reap that does not wait return at once: keeping the GIL through them saves
# handing it to another thread and taking it back (a switch on the broker's one CPU) in the middle of a send
_syscall_nb = _libc_syscall(release_gil=False)
_YIELD = _SCHED_YIELD.get(platform.machine())
_NUMBERS = _SYSCALLS.get(platform.machine())


def _check(ret: int) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


class FdsyncContext:
    """An AIO context of up to `slots` fdatasyncs in flight, completions counted on `eventfd`.

    Not thread-safe: one owner submits and reaps."""

    def __init__(self, slots: int) -> None:
        if _syscall is None or _NUMBERS is None or not hasattr(os, "eventfd"):
            raise OSError(errno.ENOSYS, "native AIO is not available on this platform")
        self._setup, self._destroy, self._submit, self._getevents = _NUMBERS
        ctx = ctypes.c_ulong(0)
        _check(_syscall(ctypes.c_long(self._setup), ctypes.c_uint(slots), ctypes.byref(ctx)))
        self._ctx = ctx.value
        try:
            self.eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError:
            _syscall(ctypes.c_long(self._destroy), ctypes.c_ulong(self._ctx))
            raise
        self.slots = slots
        self._iocbs = (ctypes.c_char * _IOCB.size * slots)()
        self._ptrs = (ctypes.c_void_p * slots)(*(ctypes.addressof(cb) for cb in self._iocbs))
        self._events = ctypes.create_string_buffer(_EVENT.size * slots)
        self.in_flight = 0
        # what each iocb slot holds now (fd, tag): a round of the same segments packs nothing
        self._packed: list[tuple[int, int] | None] = [None] * slots
        self._submit_args = (ctypes.c_long(self._submit), ctypes.c_ulong(self._ctx))
        self._counts = [ctypes.c_long(n) for n in range(slots + 1)]
        self._ring, self._ring_nr = self._map_ring()

    def _map_ring(self) -> tuple[memoryview | None, int]:
        if platform.machine() not in _RING_ARCHES:
            return None, 0
        try:
            _, nr, _, _, magic, _, incompat, hlen = _RING_HEADER.unpack(
                (ctypes.c_char * _RING_HEADER.size).from_address(self._ctx)
            )
        except (ValueError, OSError):
            return None, 0
        if magic != AIO_RING_MAGIC or incompat != 0 or hlen != _RING_HEADER.size or not 0 < nr < 1 << 20:
            return None, 0
        ring = (ctypes.c_char * (hlen + nr * _EVENT.size)).from_address(self._ctx)
        return memoryview(ring).cast("B"), nr

    def submit(self, fds: list[int], tag: int) -> None:
        """Queue one fdatasync per descriptor (at most `slots` in flight in all); returns at once."""
        n = len(fds)
        if n + self.in_flight > self.slots:
            raise OSError(errno.EAGAIN, "too many fdatasyncs in flight")
        packed = self._packed
        for i, fd in enumerate(fds):
            if packed[i] != (fd, tag):
                _IOCB.pack_into(self._iocbs[i], 0, tag, 0, 0, IOCB_CMD_FDSYNC, 0, fd, 0, 0, 0, 0,
                                IOCB_FLAG_RESFD, self.eventfd)  # fmt: skip
                packed[i] = (fd, tag)
        nr, ctx = self._submit_args
        done = _check(_syscall_nb(nr, ctx, self._counts[n], self._ptrs))
        self.in_flight += done
        if done != n:  # the kernel took only the first `done`: the caller sees the rest refused
            raise OSError(errno.EAGAIN, f"io_submit took {done} of {n} fdatasyncs")

    def hand_over(self) -> None:
        """Yield the CPU to the kernel worker that submit() just woke, keeping the GIL.

        The worker that runs an AIO fdatasync is queued on the submitting CPU, and the scheduler often lets
        it wait until the submitter blocks; the submitter is an event loop with the rest of a send (or a
        round's answers) still to do. Yielding lets the worker start the device write now (it then sleeps
        on the I/O and the loop carries on while the device works). With the GIL kept, no Python thread
        wakes for it only to find the GIL taken. bench/round_trip_probe.py, tier A, 128 B, one send in
        flight, against the same tree without the yield, 6 interleaved pairs: median round trip 332 -> 309 µs,
        a record's write to its round's completion 138 -> 133 µs."""
        if _YIELD is not None:
            _syscall_nb(_YIELD)

    def reap(self, wait_s: float | None = 0.0) -> list[tuple[int, int]]:
        """Completed fdatasyncs as (tag, result: 0 or -errno). wait_s=0: only those already done; otherwise
        block until every one in flight is done or wait_s passes (None: no limit)."""
        ring = self._ring
        if ring is not None and wait_s == 0.0:
            return self._reap_ring(ring)
        want = self.in_flight if wait_s != 0.0 else 0
        timeout = None
        if wait_s:
            timeout = ctypes.byref(_Timespec(int(wait_s), int((wait_s % 1) * 1e9)))
        n = _check(_syscall(ctypes.c_long(self._getevents), ctypes.c_ulong(self._ctx), ctypes.c_long(want),
                            ctypes.c_long(self.slots), self._events, timeout))  # fmt: skip
        self.in_flight -= n
        out = []
        for i in range(n):
            tag, _, res, _ = _EVENT.unpack_from(self._events, i * _EVENT.size)
            out.append((tag, res))
        return out

    def _reap_ring(self, ring: memoryview) -> list[tuple[int, int]]:
        """What reap(0.0) returns, read from the completion ring; head is then moved past it (the kernel
        reads head back when it counts free slots, as for libaio's user-space reaping)."""
        head, tail = _HEAD_TAIL.unpack_from(ring, 8)
        nr = self._ring_nr
        if head >= nr or tail >= nr:  # not a ring state the kernel leaves: let the kernel answer
            self._ring = None
            return self.reap(0.0)
        out = []
        while head != tail:
            tag, _, res, _ = _EVENT.unpack_from(ring, _RING_HEADER.size + head * _EVENT.size)
            out.append((tag, res))
            head = (head + 1) % nr
        if out:
            _U32.pack_into(ring, 8, head)
            self.in_flight -= len(out)
        return out

    def clear_eventfd(self) -> None:
        try:
            os.eventfd_read(self.eventfd)
        except BlockingIOError:
            pass

    def close(self) -> None:
        """io_destroy waits for what is still in flight (the kernel cancels no fdatasync it started)."""
        if self._ctx:
            if self._ring is not None:
                self._ring.release()  # the ring is unmapped with the context
                self._ring = None
            _syscall(ctypes.c_long(self._destroy), ctypes.c_ulong(self._ctx))
            self._ctx = 0
            os.close(self.eventfd)


def probe(fd: int) -> str | None:
    """None if an fdatasync of fd through native AIO works here, else why not."""
    try:
        ctx = FdsyncContext(1)
    except OSError as e:
        return f"io_setup: {e}"
    try:
        ctx.submit([fd], 0)
        done = ctx.reap(5.0)
        if not done:
            return "no completion within 5 s"
        if done[0][1] < 0:
            return f"fdatasync: {os.strerror(-done[0][1])}"
        return None
    except OSError as e:
        return f"io_submit: {e}"
    finally:
        ctx.close()
