"""SendMessageRequestHeaderV2 built by the producer (its constant part is cached per topic and queue)."""

from __future__ import annotations

import time

from rocketq.client.producer import Producer
from rocketq.client.route import LatencyFaultTolerance


def test_header_fields_and_cache_does_not_leak_between_messages() -> None:
    p = Producer("PG", namesrv="127.0.0.1:9876")
    before = int(time.time() * 1000)
    h1 = p._header("T", 3, 0, 0, {"UNIQ_KEY": "U1", "WAIT": "true"}, False)
    h2 = p._header("T", 3, 0x3, 7, {"KEYS": "k"}, False)
    h3 = p._header("%RETRY%G", 0, 0, 0, {"RECONSUME_TIME": "2", "MAX_RECONSUME_TIMES": "5", "a": "1"}, False)
    h4 = p._header("T", 3, 0, 0, {}, True)
    assert before <= int(h1["g"]) <= int(time.time() * 1000)
    h1.pop("g"), h2.pop("g"), h3.pop("g"), h4.pop("g")
    common = {"a": "PG", "c": "TBW102", "d": "4", "k": "false"}
    assert h1 == {**common, "b": "T", "e": "3", "f": "0", "h": "0", "i": "UNIQ_KEY\x01U1\x02WAIT\x01true",
                  "j": "0", "m": "false"}  # fmt: skip
    assert h2 == {**common, "b": "T", "e": "3", "f": "3", "h": "7", "i": "KEYS\x01k", "j": "0", "m": "false"}
    assert h3 == {**common, "b": "%RETRY%G", "e": "0", "f": "0", "h": "0", "i": "a\x011", "j": "2", "l": "5",
                  "m": "false"}  # fmt: skip
    assert h4 == {**common, "b": "T", "e": "3", "f": "0", "h": "0", "i": "", "j": "0", "m": "true"}
    # a later send to the same queue starts from the clean template again
    h5 = p._header("T", 3, 0, 0, {}, False)
    assert (h5["f"], h5["h"], h5["i"], "l" in h5) == ("0", "0", "", False)
    p.group = "PG2"  # attributes changed after the first send are honoured
    assert p._header("T", 3, 0, 0, {}, False)["a"] == "PG2"


def test_fault_duration_table() -> None:
    f = LatencyFaultTolerance.not_available_duration_ms
    assert [f(x) for x in (0, 49, 50, 549, 550, 999, 1000, 2999, 15000, 30000)] == [
        0, 0, 0, 0, 30000, 30000, 60000, 120000, 600000, 600000,
    ]  # fmt: skip
