"""`rocketq bench SUITE`: every suite docs/benchmarks.md shows is reachable through the one command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocketq.bench_cli import SUITES, main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def test_listing_names_every_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in SUITES)
    assert main(["nosuch"]) == 2


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_each_suite_answers_help(suite: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([suite, "--help"]) == 0
    assert "usage:" in capsys.readouterr().out


def test_the_docs_page_runs_every_suite_through_rocketq_bench() -> None:
    text = DOCS.read_text()
    commands = set(re.findall(r"`rocketq bench ([a-z-]+)", text))
    assert commands == set(SUITES), commands
    assert len(text.splitlines()) <= 450  # one page of current figures (it was 1,900 lines of history)
