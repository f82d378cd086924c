"""CRC-32 (IEEE 802.3, zlib's and java.util.zip.CRC32's polynomial), the function behind RocketMQ's BODYCRC.

The broker computes it over every message body it stores, and recovery recomputes it over every record it
scans. zlib's own crc32 (1.2.x) runs at ~7 GB/s here; ISA-L's (the `isal` package: carry-less multiply,
SIMD) at ~60 GB/s, and with a smaller call overhead: 9.2 against 1.0 µs per 64 KiB body, 0.27 against
0.05 µs per 1 KiB (bench/crc_bench.py). Same values either way; zlib's is the fallback where isal is
missing (a platform without a wheel).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

try:
    from isal.isal_zlib import crc32 as _fast_crc32
except ImportError:  # pragma: no cover - isal is a declared dependency; this keeps odd platforms working
    _fast_crc32 = None

crc32: Callable[..., int] = _fast_crc32 if _fast_crc32 is not None else zlib.crc32
"""crc32(data[, value]) -> unsigned 32-bit CRC; data is any contiguous bytes-like object."""

IMPLEMENTATION = "isal" if _fast_crc32 is not None else "zlib"


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """RocketMQ's body checksum: the CRC masked to a non-negative int32 (UtilAll.crc32)."""
    return crc32(body) & 0x7FFFFFFF
