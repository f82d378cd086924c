"""mqadmin plumbing: NameServer address handling, the `mqadmin` console script, argument parsing helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime

import pytest
from tests.helpers.procs import free_port
from tests.interop.standalone import Standalone, standalone_fixture

from rocketq.admin.fmt import parse_bool, parse_timestamp, table
from rocketq.admin.records import decode_offset_msg_id, offset_msg_id

sa = standalone_fixture("admin-cli")


def _mqadmin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "mqadmin")
    cmd = [exe, *args] if os.path.exists(exe) else [sys.executable, "-m", "rocketq.cli", "admin", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def test_console_script_and_namesrv_addr_env(sa: Standalone) -> None:
    r = _mqadmin("clusterList", env={"NAMESRV_ADDR": sa.namesrv})
    assert r.returncode == 0, r.stderr
    assert sa.broker in r.stdout
    r = _mqadmin("clusterList", env={"NAMESRV_ADDR": ""})
    assert r.returncode == 2 and "NAMESRV_ADDR" in r.stderr


def test_namesrv_list_falls_back_to_the_next_address(sa: Standalone) -> None:
    r = _mqadmin("topicList", "-n", f"127.0.0.1:{free_port()};{sa.namesrv}")
    assert r.returncode == 0, r.stderr
    assert "SELF_TEST_TOPIC" in r.stdout.split()


def test_bad_flags_exit_2() -> None:
    assert _mqadmin("updateTopic", "-n", "127.0.0.1:1", "-t", "T").returncode == 2  # neither -b nor -c
    assert _mqadmin("topicRoute", "-n", "127.0.0.1:1").returncode == 2  # no -t


def test_timestamps_and_booleans() -> None:
    assert parse_timestamp("1700000000123") == 1700000000123
    expected = int(datetime(2024, 3, 5, 6, 7, 8, 9000).timestamp() * 1000)
    assert parse_timestamp("2024-03-05#06:07:08:009") == expected
    assert abs(parse_timestamp("now") - time.time() * 1000) < 5000
    with pytest.raises(ValueError):
        parse_timestamp("yesterday")
    assert parse_bool("TRUE") is True and parse_bool("false") is False and parse_bool(None, True) is True
    with pytest.raises(ValueError):
        parse_bool("maybe")


def test_offset_msg_id_round_trip() -> None:
    mid = offset_msg_id("127.0.0.1:10091", 1024)
    assert mid == "7F0000010000276B0000000000000400"  # specs/remoting-v4.md §5
    assert decode_offset_msg_id(mid) == ("127.0.0.1:10091", 1024)
    with pytest.raises(ValueError):
        decode_offset_msg_id("not-an-id")


def test_table_aligns_columns() -> None:
    import io

    out = io.StringIO()
    table(out, ("Topic", "QID"), [("a-long-topic", 1), ("t", 12)])
    lines = out.getvalue().splitlines()
    assert lines[0].index("#QID") == lines[1].index("1") == lines[2].index("12")


def test_fastjson_bodies_from_java_brokers() -> None:
    """Java brokers write MessageQueue map keys as objects and numeric keys unquoted; both parse."""
    from rocketq.admin.client import loads, mq_of

    stats = loads(
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"T"}:'
        b'{"lastUpdateTimestamp":0,"maxOffset":5,"minOffset":1}}}'
    )
    ((key, off),) = stats["offsetTable"].items()
    assert mq_of(key) == ("T", "broker-a", 3)
    assert (off["minOffset"], off["maxOffset"]) == (1, 5)
    route = loads(b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"b","cluster":"C"}]}')
    from rocketq.admin.client import AdminClient

    assert AdminClient.route_masters(route) == {"b": "127.0.0.1:10911"}
