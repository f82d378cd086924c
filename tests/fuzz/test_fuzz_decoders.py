"""Every decoder of network or disk bytes (tests/fuzz/targets.py), fuzzed by hypothesis: only a ValueError
(a clean refusal) may come out, never another exception. CI runs a fixed example sequence per target (the
"ci" profile is derandomized); `rocketq bench fuzz` runs the same targets coverage-guided with atheris."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import REGRESSIONS, TARGETS, run_one

EXAMPLES = int(os.environ.get("ROCKETQ_FUZZ_EXAMPLES", "150"))  # per target; CI's budget is the default


# bytes near the seeds: a seed with a few bytes changed, cut or extended
def _mutated(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    if not seeds:
        return st.binary(max_size=512)

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(0, 4))):
            op = draw(st.integers(0, 3))
            pos = draw(st.integers(0, len(data))) if data else 0
            if op == 0 and data:
                data[min(pos, len(data) - 1)] = draw(st.integers(0, 255))
            elif op == 1:
                data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
            elif op == 2:
                del data[pos : pos + draw(st.integers(1, 16))]
            else:
                data = data[:pos]
        return bytes(data)

    return mutate()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_decoder_refuses_cleanly(name: str) -> None:
    t = TARGETS[name]

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(data=st.one_of(st.binary(max_size=512), _mutated(t.seeds)))
    def check(data: bytes) -> None:
        run_one(t, data)

    if t.seeds:
        t.fn(t.seeds[0])  # the first seed is a valid input: it decodes
    for seed in t.seeds[1:]:
        run_one(t, seed)
    check()


def test_every_target_has_a_valid_seed() -> None:
    assert all(t.seeds for t in TARGETS.values()), [n for n, t in TARGETS.items() if not t.seeds]


@pytest.mark.parametrize(
    ("name", "data"), REGRESSIONS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REGRESSIONS)]
)
def test_past_findings_stay_fixed(name: str, data: bytes) -> None:
    run_one(TARGETS[name], data)
