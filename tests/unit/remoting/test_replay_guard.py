"""ReplayGuard: exact replays, stamps, code binding, bounded memory."""

from __future__ import annotations

from rocketq.remoting.acl_signature import SIGNED_AT, SIGNED_CODE, ReplayGuard


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_repeat_refused_within_twice_the_window_then_forgotten() -> None:
    clock = Clock()
    g = ReplayGuard(window_s=10, clock=clock)
    assert g.check("sig", {}, 205) is None
    clock.t += 19
    assert "identical signed request" in (g.check("sig", {}, 327) or "")  # any code: the code is not signed
    clock.t += 2
    assert g.check("sig", {}, 205) is None  # 21 s later: forgotten (the window's limit for unstamped)


def test_stamps_bound_time_and_code() -> None:
    clock = Clock()
    g = ReplayGuard(window_s=10, clock=clock)
    now_ms = str(int(clock.t * 1000))
    assert g.check("a", {SIGNED_AT: now_ms, SIGNED_CODE: "205"}, 205) is None
    assert "signed for request code" in (g.check("b", {SIGNED_AT: now_ms, SIGNED_CODE: "205"}, 327) or "")
    old = str(int((clock.t - 11) * 1000))
    assert "clock" in (g.check("c", {SIGNED_AT: old}, 205) or "")
    assert "not a number" in (g.check("d", {SIGNED_AT: "x"}, 205) or "")


def test_memory_is_bounded() -> None:
    clock = Clock()
    g = ReplayGuard(window_s=10, max_entries=100, clock=clock)
    for i in range(1000):
        assert g.check(f"s{i}", {}, 205) is None
    assert len(g.seen) == 100 and g.evicted == 900
    assert g.check("s999", {}, 205) is not None  # the newest are kept


def test_remember_without_refusing() -> None:
    g = ReplayGuard(window_s=10, clock=Clock())
    assert g.check("reg", {}, 103, refuse_seen=False) is None
    assert g.check("reg", {}, 103, refuse_seen=False) is None  # a periodic registration, again
    assert g.check("reg", {}, 104) is not None  # but not as another request
