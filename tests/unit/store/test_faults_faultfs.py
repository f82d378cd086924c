"""faultfs: the power-loss recorder keeps exactly the synced bytes and builds torn-tail images."""

import mmap
import os
import random
import subprocess
import sys
import textwrap

import pytest

from rocketq.store import faultfs


@pytest.fixture
def fs(tmp_path):
    rec = faultfs.enable(str(tmp_path / "shadow"))
    yield rec
    faultfs.disable()


def test_disabled_by_default():
    assert os.environ.get(faultfs.ENV_VAR) is None
    assert faultfs.ACTIVE is None


def test_only_synced_ranges_survive(fs, tmp_path):
    live = tmp_path / "store"
    live.mkdir()
    p = live / "00000000000000000000"
    with open(p, "wb") as f:
        f.truncate(4096)
    fs.on_create(str(p), 4096)
    with open(p, "r+b") as f:
        f.write(b"A" * 1000)
    fs.on_flush(str(p), 0, 1000)
    with open(p, "r+b") as f:
        f.seek(1000)
        f.write(b"B" * 1000)  # written, never synced
    out = tmp_path / "img"
    fs.power_cut_image(str(live), str(out), rng=random.Random(1), max_torn_bytes=0)
    data = (out / p.name).read_bytes()
    assert len(data) == 4096
    assert data[:1000] == b"A" * 1000 and data[1000:] == bytes(3096)


def test_torn_tail_is_a_prefix_of_unsynced_bytes_maybe_with_garbage(fs, tmp_path):
    live = tmp_path / "store"
    live.mkdir()
    p = live / "f"
    with open(p, "wb") as f:
        f.truncate(1 << 16)
    fs.on_create(str(p), 1 << 16)
    with open(p, "r+b") as f:
        f.write(b"S" * 100 + b"U" * 5000)
    fs.on_flush(str(p), 0, 100)
    tails = set()
    for seed in range(20):
        out = tmp_path / f"img{seed}"
        fs.power_cut_image(str(live), str(out), rng=random.Random(seed), max_torn_bytes=5000)
        data = (out / "f").read_bytes()
        assert data[:100] == b"S" * 100
        tail = data[100:].rstrip(b"\0")
        tails.add(len(tail))
        # all of the tail but at most one garbage sector is the real unsynced data
        head = tail[: max(0, len(tail) - faultfs.SECTOR)]
        assert head == b"U" * len(head)
    assert len(tails) > 5


def test_delete_and_replace_are_durable(fs, tmp_path):
    live = tmp_path / "s"
    live.mkdir()
    a, b = live / "a.tmp", live / "a"
    a.write_bytes(b"x" * 10)
    fs.on_file_synced(str(a))
    os.replace(a, b)
    fs.on_replace(str(a), str(b))
    c = live / "c"
    c.write_bytes(b"c")
    fs.on_file_synced(str(c))
    os.remove(c)
    fs.on_delete(str(c))
    out = tmp_path / "img"
    fs.power_cut_image(str(live), str(out))
    assert sorted(os.listdir(out)) == ["a"] and (out / "a").read_bytes() == b"x" * 10


def test_env_var_child_records_through_journal_and_patches(tmp_path):
    """A child started with ROCKETQ_FAULTFS records; the parent builds the image after SIGKILL-like exit."""
    live = tmp_path / "live"
    live.mkdir()
    shadow = tmp_path / "shadow"
    code = textwrap.dedent(
        f"""
        import mmap, os
        from rocketq.store import faultfs
        faultfs.install_patches()          # no explicit hooks: mmap.flush and os.fdatasync are recorded
        p = {str(live / "seg")!r}
        fd = os.open(p, os.O_RDWR | os.O_CREAT)
        os.ftruncate(fd, 8192)
        faultfs.ACTIVE.on_create(p, 8192)
        m = mmap.mmap(fd, 8192)
        m[0:4096] = b"D" * 4096
        m.flush(0, 4096)
        m[4096:4200] = b"L" * 104           # lost on power cut (unless torn tail)
        q = {str(live / "ck")!r}
        with open(q, "wb") as f:
            f.write(b"checkpoint")
            f.flush()
            os.fdatasync(f.fileno())
        os._exit(0)
        """
    )
    env = dict(os.environ, **{faultfs.ENV_VAR: str(shadow)})
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    rec = faultfs.open_recorder(str(shadow))
    out = tmp_path / "img"
    rec.power_cut_image(str(live), str(out), max_torn_bytes=0)
    seg = (out / "seg").read_bytes()
    assert seg[:4096] == b"D" * 4096 and seg[4096:] == bytes(4096)
    assert (out / "ck").read_bytes() == b"checkpoint"
    assert mmap.mmap is not None


def test_pages_mode_mixes_old_and_new_pages_of_dirty_data_only(fs, tmp_path):
    live = tmp_path / "store"
    live.mkdir()
    p = live / "f"
    with open(p, "wb") as f:
        f.truncate(16 * 4096)
    fs.on_create(str(p), 16 * 4096)
    with open(p, "r+b") as f:
        f.write(b"S" * 4096)
    fs.on_flush(str(p), 0, 4096)
    with open(p, "r+b") as f:
        f.seek(4096)
        f.write(b"N" * 8 * 4096)  # pages 1..8 dirty, 9..15 untouched
    seen = set()
    for seed in range(10):
        out = tmp_path / f"img{seed}"
        fs.power_cut_image(str(live), str(out), rng=random.Random(seed), mode="pages", garbage=False)
        data = (out / "f").read_bytes()
        assert data[:4096] == b"S" * 4096 and data[9 * 4096 :] == bytes(7 * 4096)
        pages = tuple(data[i * 4096 : i * 4096 + 1] for i in range(1, 9))
        assert set(pages) <= {b"N", b"\0"}
        seen.add(pages)
    assert len(seen) > 5  # different subsets of pages survive
