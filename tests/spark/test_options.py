"""Pure option/offset logic of the connector (no Spark, no broker)."""

from __future__ import annotations

import json

import pytest

from rocketq.spark.options import OptionError, SourceOptions, canonical, duration_ms, flatten
from rocketq.spark.planning import rate_limit, split


def test_canonical_offsets_are_sorted_and_stable():
    a = {("T", "b", 10): 5, ("T", "b", 2): 1, ("A", "z", 0): 0, ("T", "a", 1): 3}
    text = json.dumps(canonical(a))
    assert text == '{"A": {"z": {"0": 0}}, "T": {"a": {"1": 3}, "b": {"2": 1, "10": 5}}}'
    assert json.dumps(canonical(flatten(json.loads(text)))) == text  # round trip through Spark's JSON


def test_rate_limit_prorates_like_kafka():
    start = {("T", "b", 0): 0, ("T", "b", 1): 0, ("T", "b", 2): 0}
    latest = {("T", "b", 0): 1000, ("T", "b", 1): 10, ("T", "b", 2): 0}
    end = rate_limit(start, latest, 100)
    # shares: 99.0 -> floor 99, 0.99 -> ceil 1, 0 -> 0
    assert end == {("T", "b", 0): 99, ("T", "b", 1): 1, ("T", "b", 2): 0}
    assert rate_limit(start, latest, 5000) == latest


def test_split_by_max_per_partition_and_min_partitions():
    o = SourceOptions.parse({"nameserver": "x:1", "topic": "T", "maxMessagesPerPartition": "4"}, False)
    parts = split({("T", "b", 0): (0, 10), ("T", "b", 1): (5, 5)}, o)
    assert [(p.start, p.end) for p in parts] == [(0, 4), (4, 8), (8, 10)]
    o = SourceOptions.parse({"nameserver": "x:1", "topic": "T", "minPartitions": "4"}, False)
    parts = split({("T", "b", 0): (0, 100)}, o)
    assert len(parts) == 4 and parts[0].start == 0 and parts[-1].end == 100


def test_option_validation():
    with pytest.raises(OptionError, match="nameserver"):
        SourceOptions.parse({"topic": "T"}, False)
    with pytest.raises(OptionError, match="exactly one"):
        SourceOptions.parse({"nameserver": "x:1"}, False)
    with pytest.raises(OptionError, match="batch queries only"):
        SourceOptions.parse({"nameserver": "x:1", "topic": "T", "endingOffsets": "latest"}, True)
    with pytest.raises(OptionError, match="consumerGroup"):
        SourceOptions.parse({"nameserver": "x:1", "topic": "T", "startingOffsets": "group"}, True)
    o = SourceOptions.parse(
        {"NameServer": "x:1", "Assign": '{"T":{"b":[1,0]}}', "startingOffsets": '{"T":{"b":{"0":7}}}'}, True
    )
    assert o.assign == {("T", "b", 0): -2, ("T", "b", 1): -2} and o.starting_json == {("T", "b", 0): 7}
    assert duration_ms("15m") == 900_000 and duration_ms("30s") == 30_000 and duration_ms("250") == 250
