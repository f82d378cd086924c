"""broker/conf_file.py: updateBrokerConfig's changes saved into broker.conf: only the changed keys' lines
move, the value that wins on reload is the new one, and the file is replaced whole or not at all."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.broker.conf_file import persist_changes
from rocketq.broker.config import load_config
from rocketq.broker.javaprops import parse_properties


def _last(text: str) -> dict[str, str]:
    return {k: v for k, v, _ in parse_properties(text)}


def test_rewrites_in_place_appends_the_rest_and_keeps_everything_else(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# the cluster\nbrokerClusterName=DefaultCluster\n\n"
        "maxMessageSize = 1000\n! old style comment\nbrokerName=broker-a\n"
    )
    persist_changes(str(conf), {"maxMessageSize": "2000", "syncFlushTimeout": "300"})
    assert conf.read_text() == (
        "# the cluster\nbrokerClusterName=DefaultCluster\n\n"
        "maxMessageSize=2000\n! old style comment\nbrokerName=broker-a\nsyncFlushTimeout=300\n"
    )
    cfg = load_config(str(conf))
    assert (cfg["maxMessageSize"], cfg["syncFlushTimeout"], cfg["brokerName"]) == (2000, 300, "broker-a")
    assert [p.name for p in tmp_path.iterdir()] == ["broker.conf"]  # no temporary file left behind


def test_the_entry_that_wins_holds_the_new_value(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    # set twice (the last wins), and once more continued over two lines after that
    conf.write_text("region=a\nregion=b\nbrokerName=x\nregion=c\\\n  d\n")
    persist_changes(str(conf), {"region": "east"})
    text = conf.read_text()
    assert _last(text)["region"] == "east"
    assert text.startswith("region=east\nregion=east\nbrokerName=x\nregion=c\\\n  d\n")


def test_file_mode_and_line_breaks_are_kept(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"# windows\r\nregion=a\r\nbrokerName=x")  # no break after the last line
    os.chmod(conf, 0o640)
    persist_changes(str(conf), {"region": "b", "maxMessageSize": "9"})
    assert conf.read_bytes() == b"# windows\r\nregion=b\r\nbrokerName=x\nmaxMessageSize=9\n"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o640


def test_a_failed_replace_leaves_the_file_and_no_temporary(tmp_path: Path, monkeypatch) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("region=a\n")

    def refuse(src, dst):
        raise PermissionError("read-only")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        persist_changes(str(conf), {"region": "c"})
    assert conf.read_text() == "region=a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["broker.conf"]


def test_a_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        persist_changes(str(tmp_path / "gone.conf"), {"region": "b"})


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=200, deadline=None)
@given(value=_text, other=_text)
def test_any_value_reads_back_as_written(
    tmp_path_factory: pytest.TempPathFactory, value: str, other: str
) -> None:
    # javaprops drops a value's trailing whitespace, as Java's Properties does not; compare what it keeps
    conf = tmp_path_factory.mktemp("p") / "broker.conf"
    conf.write_text("brokerName=b\nregion=old\n")
    persist_changes(str(conf), {"region": value, "brokerClusterName": other})
    got = _last(conf.read_text())
    assert got["region"] == value.rstrip()
    assert got["brokerClusterName"] == other.rstrip()
    assert got["brokerName"] == "b"
