"""Shared fixtures. Process helpers live in tests/helpers/procs.py."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.helpers.procs import RocketqProcess, start_namesrv, start_rocketq

# CI runs every property test on a fixed example sequence, so a red CI is reproducible and a green one
# is not luck; local runs keep exploring new examples (and save failures in .hypothesis/).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def rocketq_procs() -> Iterator[Callable[..., RocketqProcess]]:
    """Factory: ``rocketq_procs(args, boot_line=...)``; every started process is stopped at teardown."""
    started: list[RocketqProcess] = []

    def start(*args: Any, **kwargs: Any) -> RocketqProcess:
        proc = start_rocketq(*args, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in reversed(started):
        proc.stop()


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[RocketqProcess]:
    """A NameServer process on a free port with its home in tmp_path/namesrv-home."""
    proc = start_namesrv(tmp_path / "namesrv-home")
    yield proc
    proc.stop()
