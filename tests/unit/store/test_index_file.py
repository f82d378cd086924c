"""IndexFile / IndexService: raw layout against the seed, queries, rolling, recovery, corruption,
retention."""

import os
import struct

import pytest

from rocketq.store.index_file import (
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    IndexFile,
    IndexService,
    index_file_size,
    index_key_hash,
    java_string_hash,
)

SLOTS, NUM = 8, 16
T0 = 1_700_000_000_000


def raw(path):
    with open(path, "rb") as f:
        return f.read()


def header(data):
    return struct.unpack_from(">qqqqii", data, 0)


def entry(data, i, slots=SLOTS):
    return struct.unpack_from(">iqii", data, INDEX_HEADER_SIZE + slots * 4 + i * INDEX_ENTRY_SIZE)


def slot(data, s):
    return struct.unpack_from(">i", data, INDEX_HEADER_SIZE + s * 4)[0]


def test_java_hash_matches_known_values():
    # values computed by java.lang.String.hashCode
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("TopicTest#KEY1") == java_string_hash("TopicTest#KEY1")
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert index_key_hash("polygenelubricants") == 0  # abs(MIN_VALUE) -> 0 as RocketMQ does
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("中文") == 20013 * 31 + 25991
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair
    assert index_key_hash("abcdefghij") == abs(java_string_hash("abcdefghij"))


def test_topic_key_hash_equals_hash_of_the_joined_key():
    import random

    from rocketq.store.index_file import build_key, topic_key_hash

    rng = random.Random(3)
    alphabet = "abcXYZ019#-_%中文\U0001f600"
    for _ in range(500):
        topic = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        key = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 600)))
        assert topic_key_hash(topic, key) == index_key_hash(build_key(topic, key)), (topic, key)


def test_default_size_matches_seed():
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040


def test_raw_layout(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, NUM, clock_ms=lambda: T0)
    svc.load()
    svc.build_index("T", "k1 k2", "U1", 100, T0 + 500)
    svc.build_index("T", "k1", None, 200, T0 + 3_700)
    svc.flush()
    (f,) = svc.files()
    assert len(f.name) == 17 and f.name.isdigit()
    data = raw(f.path)
    assert len(data) == 40 + SLOTS * 4 + NUM * 20
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = header(data)
    assert (begin_ts, end_ts, begin_phy, end_phy) == (T0 + 500, T0 + 3_700, 100, 200)
    assert index_count == 1 + 4  # entry 0 is never used
    # entries in order: UNIQ_KEY first, then each KEYS element
    hashes = [index_key_hash(k) for k in ("T#U1", "T#k1", "T#k2", "T#k1")]
    assert entry(data, 0) == (0, 0, 0, 0)
    got = [entry(data, i) for i in range(1, 5)]
    assert [g[0] for g in got] == hashes
    assert [g[1] for g in got] == [100, 100, 100, 200]
    assert [g[2] for g in got] == [0, 0, 0, 3]  # seconds since beginTimestamp
    # the second T#k1 entry chains to the first one; the slot holds the newest entry
    assert got[3][3] == 2
    assert slot(data, hashes[3] % SLOTS) == 4
    used = {h % SLOTS for h in hashes}
    assert slot_count == len(used)
    svc.close()


def test_query_by_key_and_time(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, 64, clock_ms=lambda: T0)
    svc.load()
    for i in range(40):
        svc.build_index("T", f"k{i % 5}", f"U{i}", 1000 + i * 100, T0 + i * 10_000)
    offs, last_ts, last_phy = svc.query_offsets("T", "k3", 32, 0, 2**62)
    assert offs == [1000 + i * 100 for i in reversed(range(40)) if i % 5 == 3]
    assert (last_ts, last_phy) == (T0 + 39 * 10_000, 1000 + 39 * 100)
    # time window: only messages stored within [T0+100s, T0+200s]
    offs, _, _ = svc.query_offsets("T", "k3", 32, T0 + 100_000, T0 + 200_000)
    assert offs == [1000 + i * 100 for i in reversed(range(10, 21)) if i % 5 == 3]
    assert svc.query_offsets("T", "U7", 32, 0, 2**62)[0] == [1700]
    assert svc.query_offsets("Other", "U7", 32, 0, 2**62)[0] == []
    assert len(svc.query_offsets("T", "k1", 3, 0, 2**62)[0]) == 3
    assert len(svc.query_offsets("T", "k1", 1000, 0, 2**62)[0]) == 8  # all there are (<= 64 cap)
    svc.close()


def test_rolls_to_new_file_and_queries_across(tmp_path):
    clock = [T0]
    svc = IndexService(str(tmp_path), SLOTS, NUM, clock_ms=lambda: clock[0])
    svc.load()
    for i in range(50):
        clock[0] += 1
        svc.build_index("T", "same", None, i * 10, T0 + i * 1000)
    files = svc.files()
    assert len(files) == 4  # 15 entries per file (entry 0 unused)
    assert [f.name for f in files] == sorted(f.name for f in files)
    assert files[1].begin_phy_offset == 150
    offs, _, last_phy = svc.query_offsets("T", "same", 64, 0, 2**62)
    assert offs == [i * 10 for i in reversed(range(50))]
    assert last_phy == 490
    svc.close()
    # reload: same answers
    svc2 = IndexService(str(tmp_path), SLOTS, NUM)
    svc2.load()
    assert svc2.query_offsets("T", "same", 64, 0, 2**62)[0] == offs
    svc2.close()


def test_build_skips_already_indexed_offsets(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, NUM)
    svc.load()
    svc.build_index("T", "a", None, 100, T0)
    svc.build_index("T", "a", None, 100, T0)  # replay after recovery
    svc.build_index("T", "a", None, 50, T0)
    assert svc.query_offsets("T", "a", 10, 0, 2**62)[0] == [100]
    # a crash after the first of a record's keys: the replay adds only the missing ones
    svc.build_index("T", "x", None, 150, T0)
    svc.build_index("T", "x y z", None, 150, T0)
    assert [svc.query_offsets("T", k, 10, 0, 2**62)[0] for k in "xyz"] == [[150], [150], [150]]
    assert svc.files()[0].index_count == 1 + 4
    svc.build_index("T", None, None, 200, T0)  # no keys: nothing
    assert svc.end_phy_offset == 150
    svc.close()


def test_truncate_after_drops_entries_beyond_commitlog_end(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, NUM)
    svc.load()
    for i in range(40):
        svc.build_index("T", f"k{i % 3}", None, i * 100, T0 + i)
    assert len(svc.files()) == 3
    svc.truncate_after(2050)  # CommitLog ends inside the 21st record
    assert svc.end_phy_offset == 2000
    for k in range(3):
        assert svc.query_offsets("T", f"k{k}", 64, 0, 2**62)[0] == [
            i * 100 for i in reversed(range(21)) if i % 3 == k
        ]
    # new appends chain correctly after the cut
    svc.build_index("T", "k0", None, 2100, T0 + 50)
    assert svc.query_offsets("T", "k0", 64, 0, 2**62)[0][:2] == [2100, 1800]
    svc.close()
    svc = IndexService(str(tmp_path), SLOTS, NUM)
    svc.load(last_exit_ok=False)
    assert svc.query_offsets("T", "k0", 64, 0, 2**62)[0][:2] == [2100, 1800]
    svc.truncate_after(0)
    assert all(f.index_count == 1 for f in svc.files())
    assert svc.query_offsets("T", "k0", 64, 0, 2**62)[0] == []
    svc.close()


def test_delete_files_before(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, NUM)
    svc.load()
    for i in range(50):
        svc.build_index("T", "k", None, i * 100, T0 + i)
    names = [f.name for f in svc.files()]
    assert len(names) == 4
    assert svc.delete_files_before(1400) == 0  # first file ends at 1400: still needed
    assert svc.delete_files_before(3000) == 2
    assert [f.name for f in svc.files()] == names[2:]
    assert sorted(os.listdir(tmp_path / "index")) == names[2:]
    assert svc.delete_files_before(10**9) == 1  # never the newest
    assert svc.query_offsets("T", "k", 64, 0, 2**62)[0] == [i * 100 for i in reversed(range(45, 50))]
    svc.close()


def _filled(tmp_path, n=12):
    svc = IndexService(str(tmp_path), SLOTS, 32)
    svc.load()
    for i in range(n):
        svc.build_index("T", f"k{i % 4}", None, i * 100, T0 + i * 1000)
    svc.close()
    (name,) = os.listdir(tmp_path / "index")
    return tmp_path / "index" / name


def _patch(path, pos, data):
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def test_corrupt_header_drops_file_and_asks_for_rebuild(tmp_path):
    p = _filled(tmp_path)
    _patch(p, 36, struct.pack(">i", 10_000))  # indexCount beyond the file
    svc = IndexService(str(tmp_path), SLOTS, 32)
    svc.load(last_exit_ok=True)
    assert svc.files() == []
    assert not p.exists()
    assert svc.rebuild_from_phy_offset == 0
    # re-dispatch rebuilds it
    for i in range(12):
        svc.build_index("T", f"k{i % 4}", None, i * 100, T0 + i * 1000)
    assert svc.query_offsets("T", "k1", 64, 0, 2**62)[0] == [900, 500, 100]
    svc.close()


def test_wrong_size_file_is_dropped(tmp_path):
    p = _filled(tmp_path)
    with open(p, "r+b") as f:
        f.truncate(100)
    svc = IndexService(str(tmp_path), SLOTS, 32)
    svc.load()
    assert svc.files() == [] and svc.rebuild_from_phy_offset == 0
    svc.close()


def test_corrupt_entry_is_cut_off_after_crash(tmp_path):
    p = _filled(tmp_path)
    pos = INDEX_HEADER_SIZE + SLOTS * 4 + 8 * INDEX_ENTRY_SIZE + 4  # phyOffset of entry 8
    _patch(p, pos, struct.pack(">q", 2**40))
    svc = IndexService(str(tmp_path), SLOTS, 32)
    svc.load(last_exit_ok=False)
    (f,) = svc.files()
    assert f.index_count == 8
    assert svc.rebuild_from_phy_offset == 600
    offs = svc.query_offsets("T", "k3", 64, 0, 2**62)[0]
    assert offs == [300]  # 700 and 1100 were after the bad entry; nothing points past the CommitLog
    for i in range(12):  # re-dispatch from the rebuild point
        svc.build_index("T", f"k{i % 4}", None, i * 100, T0 + i * 1000)
    assert svc.query_offsets("T", "k3", 64, 0, 2**62)[0] == [1100, 700, 300]
    svc.close()


def test_corrupt_slot_table_is_rebuilt(tmp_path):
    p = _filled(tmp_path)
    h = index_key_hash("T#k2")
    _patch(p, INDEX_HEADER_SIZE + (h % SLOTS) * 4, struct.pack(">i", 3))  # points at an entry of another key
    svc = IndexService(str(tmp_path), SLOTS, 32)
    svc.load(last_exit_ok=False)
    assert svc.query_offsets("T", "k2", 64, 0, 2**62)[0] == [1000, 600, 200]
    svc.close()


def test_bit_flips_stay_within_indexed_range(tmp_path):
    import random

    rng = random.Random(7)
    for round_ in range(30):
        d = tmp_path / f"r{round_}"
        d.mkdir()
        p = _filled(d, n=20)
        size = os.path.getsize(p)
        for _ in range(3):
            pos = rng.randrange(size)
            with open(p, "r+b") as f:
                f.seek(pos)
                b = f.read(1)[0]
                f.seek(pos)
                f.write(bytes([b ^ (1 << rng.randrange(8))]))
        svc = IndexService(str(d), SLOTS, 32)
        svc.load(last_exit_ok=False)
        for k in range(4):
            offs, _, _ = svc.query_offsets("T", f"k{k}", 64, 0, 2**62)
            # the index has no checksums: a flipped offset can stay plausible, so the store re-checks the
            # record
            # (topic, key, CRC) at every offset; here: never beyond the indexed range, chains always terminate
            assert all(0 <= o <= 1900 for o in offs), offs
        svc.close()


def test_direct_indexfile_full(tmp_path):
    f = IndexFile(str(tmp_path / "x"), SLOTS, 4)
    assert f.put_key(1, 10, T0) and f.put_key(2, 20, T0) and f.put_key(3, 30, T0)
    assert f.is_full() and not f.put_key(4, 40, T0)
    f.close()
    with pytest.raises(FileExistsError):
        IndexFile(str(tmp_path / "x"), SLOTS, 4)


def test_file_names_stay_ordered_when_the_clock_goes_back(tmp_path):
    clock = [T0]
    svc = IndexService(str(tmp_path), SLOTS, 4, clock_ms=lambda: clock[0])
    svc.load()
    for i in range(3):
        svc.build_index("T", "k", None, i, T0)
    svc.close()
    clock[0] = T0 - 86_400_000  # a day back, after a restart
    svc = IndexService(str(tmp_path), SLOTS, 4, clock_ms=lambda: clock[0])
    svc.load()
    for i in range(3, 9):
        svc.build_index("T", "k", None, i, T0)
    names = [f.name for f in svc.files()]
    assert names == sorted(names) and len(names) == 3
    svc.close()
    svc = IndexService(str(tmp_path), SLOTS, 4)
    svc.load()
    assert svc.query_offsets("T", "k", 64, 0, 2**62)[0] == list(range(8, -1, -1))
    svc.close()


def test_unflushed_entries_behind_a_torn_header_are_dropped(tmp_path):
    """Power cut: the header (count) reached the disk, the entries it counts did not (all zero)."""
    p = _filled(tmp_path, n=12)
    with open(p, "r+b") as f:
        f.seek(INDEX_HEADER_SIZE + SLOTS * 4 + 5 * INDEX_ENTRY_SIZE)
        f.write(bytes(7 * INDEX_ENTRY_SIZE))  # entries 5..11 never written
    svc = IndexService(str(tmp_path), SLOTS, 32)
    svc.load(last_exit_ok=False)
    assert svc.files()[0].index_count == 5 and svc.end_phy_offset == 300
    assert svc.rebuild_from_phy_offset == 300
    for i in range(12):
        svc.build_index("T", f"k{i % 4}", None, i * 100, T0 + i * 1000)
    assert svc.query_offsets("T", "k0", 64, 0, 2**62)[0] == [800, 400, 0]
    svc.close()


def test_all_entries_lost_from_the_first_message_on(tmp_path):
    p = _filled(tmp_path, n=12)
    with open(p, "r+b") as f:
        f.seek(INDEX_HEADER_SIZE)
        f.write(bytes(SLOTS * 4 + 12 * INDEX_ENTRY_SIZE))  # header survived, nothing else
    svc = IndexService(str(tmp_path), SLOTS, 32)
    svc.load(last_exit_ok=False)
    assert svc.files()[0].index_count == 1
    for i in range(12):
        svc.build_index("T", f"k{i % 4}", None, i * 100, T0 + i * 1000)
    assert svc.query_offsets("T", "k0", 64, 0, 2**62)[0] == [800, 400, 0]
    svc.close()
