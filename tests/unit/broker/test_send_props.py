"""The send path's property-string lookups agree with string_to_properties (the last pair wins)."""

from __future__ import annotations

import random

from rocketq.broker.processors.send import _last_value
from rocketq.protocol.properties import string_to_properties


def test_last_value_matches_the_parsed_dict():
    rng = random.Random(5)
    keys = ["TAGS", "WAIT", "XTAGS", "TAGSX", "A", "KEYS"]
    for _ in range(2000):
        pairs = [f"{rng.choice(keys)}\x01{rng.choice(['', 'false', 'v1', 'a b', 'x' * 3])}" for _ in range(4)]
        text = "\x02".join(pairs) + rng.choice(["", "\x02"])
        parsed = string_to_properties(text)
        for k in ("TAGS", "WAIT"):
            assert _last_value(text, k) == parsed.get(k), (text, k)
