"""The body CRC per message size: zlib's crc32 against the one the broker uses (rocketq.protocol.crc).

    python bench/crc_bench.py

Prints µs per call (best of 5 repeats) and GB/s for 128 B to 64 KiB bodies, each passed as a memoryview (as
the store does)."""

from __future__ import annotations

import os
import sys
import timeit
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from rocketq.protocol import crc


def main() -> None:
    print(f"rocketq.protocol.crc uses {crc.IMPLEMENTATION}; zlib {zlib.ZLIB_RUNTIME_VERSION}")
    print(f"{'size':>7} {'zlib µs':>9} {'GB/s':>6} {crc.IMPLEMENTATION + ' µs':>9} {'GB/s':>6} {'ratio':>6}")
    for size in (128, 1024, 4096, 65536):
        body = memoryview(os.urandom(size))
        n = 200_000 // max(1, size // 1024) if size >= 1024 else 200_000
        row = []
        for fn in (zlib.crc32, crc.crc32):
            best = min(timeit.repeat(lambda fn=fn, body=body: fn(body), number=n, repeat=5)) / n
            row.append(best)
        print(
            f"{size:>7} {row[0] * 1e6:>9.3f} {size / row[0] / 1e9:>6.1f} "
            f"{row[1] * 1e6:>9.3f} {size / row[1] / 1e9:>6.1f} {row[0] / row[1]:>6.1f}"
        )


if __name__ == "__main__":
    main()
