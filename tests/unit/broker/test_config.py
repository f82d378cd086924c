from __future__ import annotations

import pytest

from rocketq.broker.config import ConfigError, load_config, parse_delay_levels
from rocketq.broker.javaprops import parse_properties


def test_java_properties_forms():
    text = (
        "# comment\n"
        "! another comment\n"
        "a=1\n"
        "b : two\n"
        "c three\n"
        "  d=  spaced  \n"
        "e=multi \\\n"
        "    line\n"
        "f=tab\\tand\\u0041\n"
        "g\\=k=v\n"
        "h=\n"
    )
    got = {k: v for k, v, _ in parse_properties(text)}
    assert got == {
        "a": "1",
        "b": "two",
        "c": "three",
        "d": "spaced",
        "e": "multi line",
        "f": "tab\tandA",
        "g=k": "v",
        "h": "",
    }
    lines = {k: n for k, _, n in parse_properties(text)}
    assert lines["a"] == 3 and lines["e"] == 7


def test_load_config_defaults_and_keys(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=C1\nbrokerName=broker-x\nbrokerId=0\nlistenPort=10999\n"
        f"storePathRootDir={tmp_path}/store\nflushDiskType=SYNC_FLUSH\nautoCreateTopicEnable=true\n"
        "messageDelayLevel=1s 2s 3m 1h\nmapedFileSizeCommitLog=1048576\n"
    )
    cfg = load_config(str(conf), {"namesrvAddr": "127.0.0.1:9876"})
    assert cfg["brokerName"] == "broker-x"
    assert cfg.broker_name == "broker-x"
    assert cfg["listenPort"] == 10999
    assert cfg["autoCreateTopicEnable"] is True
    assert cfg["autoCreateSubscriptionGroup"] is True
    assert cfg["defaultTopicQueueNums"] == 8
    assert cfg["maxMessageSize"] == 4 * 1024 * 1024
    assert cfg.delay_levels_ms == [1000, 2000, 180_000, 3_600_000]
    assert cfg.commitlog_file_size == 1048576
    assert cfg["storePathCommitLog"] == f"{tmp_path}/store/commitlog"
    assert cfg.namesrv_addrs() == ["127.0.0.1:9876"]


def test_defaults_without_file():
    cfg = load_config(None)
    assert cfg["autoCreateTopicEnable"] is False
    assert cfg["brokerClusterName"] == "DefaultCluster"
    assert len(cfg.delay_levels_ms) == 18


@pytest.mark.parametrize(
    "line, needle",
    [
        ("brokerNmae=x", "brokerNmae"),
        ("listenPort=abc", "listenPort"),
        ("autoCreateTopicEnable=yes", "autoCreateTopicEnable"),
        ("flushDiskType=SOMETIMES", "flushDiskType"),
        ("messageDelayLevel=1s 5x", "messageDelayLevel"),
        ("brokerName=bad name", "brokerName"),
    ],
)
def test_bad_keys_are_errors(tmp_path, line, needle):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerId=0\n{line}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(str(conf))
    assert needle in str(exc.value)


def test_unknown_key_names_line(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("# c\nbrokerId=0\n\nnoSuchKey=1\n")
    with pytest.raises(ConfigError, match=r"line 4.*noSuchKey"):
        load_config(str(conf))


def test_delay_levels():
    assert parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")[-1] == 7_200_000
    with pytest.raises(ValueError):
        parse_delay_levels("")


def test_store_flush_keys_reach_the_store_config(tmp_path):
    from rocketq.broker.controller import store_config_of

    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"storePathRootDir={tmp_path}/store\nflushIntervalConsumeQueue=3000\nflushConsumeQueueLeastPages=5\n"
        "flushConsumeQueueThoroughInterval=90000\ncommitLogAsyncWritebackBytes=1048576\n"
    )
    sc = store_config_of(load_config(str(conf)))
    assert (sc.flush_interval_consume_queue, sc.flush_consume_queue_least_pages) == (3000, 5)
    assert sc.flush_consume_queue_thorough_interval == 90000
    assert sc.async_writeback_bytes == 1048576
    defaults = store_config_of(load_config(None))
    assert (defaults.flush_interval_consume_queue, defaults.async_writeback_bytes) == (1000, 0)


@pytest.mark.parametrize(
    "text, commitlog, cq",
    [
        ("", 1 << 30, 6_000_000),
        ("mapedFileSizeCommitLog=1048576\n", 1048576, 6_000_000),
        ("mappedFileSizeCommitLog=2097152\nmapedFileSizeConsumeQueue=40000\n", 2097152, 40000),
        ("mapedFileSizeCommitLog=1048576\nmappedFileSizeCommitLog=2097152\n", 2097152, 6_000_000),
    ],
)
def test_listing_shows_each_renamed_size_key_once_with_the_size_in_effect(tmp_path, text, commitlog, cq):
    path = tmp_path / "broker.conf"
    path.write_text(text)
    lines = load_config(str(path)).listing()
    keys = [line.split("=", 1)[0] for line in lines]
    assert len(keys) == len(set(keys))
    assert "mapedFileSizeCommitLog" not in keys and "mapedFileSizeConsumeQueue" not in keys
    assert f"mappedFileSizeCommitLog={commitlog}" in lines
    assert f"mappedFileSizeConsumeQueue={cq}" in lines
    assert "autoCreateTopicEnable=false" in lines  # booleans as Java prints them


@pytest.mark.parametrize(
    "text, commitlog, hash_slots",
    [
        ("", 32 * 1024 * 1024, 100_000),  # the laptop sizes
        ("mapedFileSizeCommitLog=1073741824\n", 1 << 30, 100_000),  # either spelling set: the file wins
        ("mappedFileSizeCommitLog=1073741824\nmaxHashSlotNum=5000000\n", 1 << 30, 5_000_000),
    ],
)
def test_standalone_store_sizes_unless_broker_conf_sets_them(tmp_path, text, commitlog, hash_slots):
    from rocketq.standalone import apply_embedded_sizes

    path = tmp_path / "broker.conf"
    path.write_text(text)
    cfg = load_config(str(path))
    apply_embedded_sizes(cfg)
    assert cfg.commitlog_file_size == commitlog
    assert cfg["maxHashSlotNum"] == hash_slots
    assert cfg.consume_queue_file_size == 600_000 and cfg["maxIndexNum"] == 400_000
