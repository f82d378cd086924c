"""The BODYCRC function: ISA-L's CRC-32 must give zlib's (java.util.zip.CRC32's) values for every input the
broker hands it (bytes, bytearray, memoryview slices of a map), or records written before and after the
switch, and by Java brokers, would fail each other's CRC checks."""

from __future__ import annotations

import mmap
import zlib

from hypothesis import given
from hypothesis import strategies as st

from rocketq.protocol import crc
from rocketq.protocol.route import body_crc32


def test_the_fast_implementation_is_installed() -> None:
    # isal is a declared dependency: a silent fallback to zlib would cost ~8 µs per 64 KiB message
    assert crc.IMPLEMENTATION == "isal"
    assert crc.crc32 is not zlib.crc32


@given(st.binary(max_size=70_000), st.integers(0, 2**32 - 1))
def test_same_values_as_zlib(data: bytes, start: int) -> None:
    assert crc.crc32(data) == zlib.crc32(data)
    assert crc.crc32(data, start) == zlib.crc32(data, start)
    assert crc.crc32(bytearray(data)) == zlib.crc32(data)
    assert crc.body_crc(data) == body_crc32(data) == zlib.crc32(data) & 0x7FFFFFFF


@given(st.binary(min_size=1, max_size=9000), st.integers(0, 8999), st.integers(0, 8999))
def test_memoryview_slices_of_a_map(data: bytes, a: int, b: int) -> None:
    lo, hi = sorted((a % len(data), b % len(data)))
    mm = mmap.mmap(-1, len(data))
    try:
        mm[:] = data
        with memoryview(mm) as view, view[lo:hi] as part:
            assert crc.crc32(part) == zlib.crc32(data[lo:hi])
    finally:
        mm.close()


def test_incremental_equals_whole() -> None:
    data = bytes(range(256)) * 300
    running = 0
    for i in range(0, len(data), 4097):
        running = crc.crc32(data[i : i + 4097], running)
    assert running == zlib.crc32(data)
