import sys

import pytest

from rocketq import cli, runtime

CASES = [(None, runtime.DEFAULT_SWITCH_INTERVAL_US), ("1000", 1000), ("0", 0), ("-3", 0), ("x", 0)]
STUB = ("operator:length_hint", "")  # a stand-in target returning 0: no broker boots


@pytest.mark.parametrize(("raw", "want"), CASES)
def test_switch_interval_us(raw: str | None, want: int) -> None:
    env = {} if raw is None else {runtime.SWITCH_INTERVAL_ENV: raw}
    assert runtime.switch_interval_us(env) == want


def test_broker_commands_set_the_switch_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    before = sys.getswitchinterval()
    monkeypatch.setenv(runtime.SWITCH_INTERVAL_ENV, "700")
    monkeypatch.setitem(cli.SUBCOMMANDS, "standalone", STUB)
    try:
        cli._run(cli.SUBCOMMANDS["standalone"][0], [])
        assert sys.getswitchinterval() == pytest.approx(700e-6)
    finally:
        sys.setswitchinterval(before)


def test_other_commands_keep_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    before = sys.getswitchinterval()
    monkeypatch.setenv(runtime.SWITCH_INTERVAL_ENV, "700")
    monkeypatch.setitem(cli.SUBCOMMANDS, "admin", STUB)
    cli._run(cli.SUBCOMMANDS["admin"][0], [])
    assert sys.getswitchinterval() == before
