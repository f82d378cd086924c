"""find_in_map is mm.find without searching up to the map's last byte (CPython 3.11.0-3.11.4 read one byte
past a searched range, gh-105235: at the end of a map that is a segmentation fault). Its answers must be
mm.find's, wherever the range ends, the map's end included."""

from __future__ import annotations

import mmap
import random

import pytest

from rocketq.store.mapped_file import find_in_map

PAGE = mmap.PAGESIZE


@pytest.fixture
def mm():
    m = mmap.mmap(-1, 4 * PAGE)
    rng = random.Random(11)
    m[:] = bytes(rng.choice(b"\x00\x01\x02ab") for _ in range(4 * PAGE))
    m[-5:] = b"KEY\x01v"  # a match that ends exactly at the map's end
    yield m
    m.close()


def test_matches_mm_find_everywhere(mm):
    size = len(mm)
    rng = random.Random(5)
    needles = [b"KEY\x01v", b"\x01v", b"v", b"\x02", b"ab\x00", b"", b"zz", bytes(3)]
    starts = [0, 1, size - 64, size - 5, size - 1, size]
    for _ in range(300):
        starts.append(rng.randrange(size + 1))
    for needle in needles:
        for start in starts:
            for end in {size, size - 1, min(size, start + 7), rng.randrange(start, size + 1)}:
                assert find_in_map(mm, needle, start, end) == mm.find(needle, start, end), (
                    needle,
                    start,
                    end,
                )


def test_the_needle_at_the_very_end_is_found(mm):
    size = len(mm)
    assert find_in_map(mm, b"KEY\x01v", size - 5, size) == size - 5
    assert find_in_map(mm, b"v", size - 1, size) == size - 1
    assert find_in_map(mm, b"KEY\x01v", size - 4, size) == -1


def test_a_whole_range_needle_up_to_the_end(mm):
    """The last-nonzero scan's compare: a needle as long as the range (the gh-105235 crash case)."""
    size = len(mm)
    mm[size - PAGE :] = bytes(PAGE)
    assert find_in_map(mm, bytes(PAGE), size - PAGE, size) == size - PAGE
    mm[size - 1] = 1
    assert find_in_map(mm, bytes(PAGE), size - PAGE, size) == -1
