"""`rocketq --version` and `rocketq --help` (with examples that name real commands)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import pytest

from rocketq.admin.main import COMMANDS
from rocketq.cli import SUBCOMMANDS, main


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rocketq {importlib.metadata.version('rocketq')}"


def test_help_lists_commands_and_examples_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out
    examples = [ln.split() for ln in out.split("examples:")[1].splitlines() if ln.startswith("  rocketq ")]
    assert len(examples) >= 5
    for words in examples:
        if words[1] in ("COMMAND", "--version"):
            continue
        assert words[1] in SUBCOMMANDS, words
        if words[1] == "admin" and "-n" in words:  # an invocation, not a description
            assert words[2] in COMMANDS, words


def test_the_installed_command_answers_version() -> None:
    exe = os.path.join(os.path.dirname(sys.executable), "rocketq")
    if not os.path.exists(exe):
        pytest.skip("no rocketq console script next to this interpreter")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("rocketq "), out.stderr
