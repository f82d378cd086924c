"""The table of mqadmin commands: each module registers its commands here with ``@command``."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TextIO

from .client import AdminClient

Runner = Callable[[AdminClient, argparse.Namespace, TextIO], Awaitable[int | None]]
ArgsBuilder = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str
    add_args: ArgsBuilder
    run: Runner


COMMANDS: dict[str, Command] = {}


def command(name: str, summary: str, add_args: ArgsBuilder) -> Callable[[Runner], Runner]:
    def wrap(run: Runner) -> Runner:
        COMMANDS[name] = Command(name, summary, add_args, run)
        return run

    return wrap


class UsageError(Exception):
    """Bad command-line input (exit code 2, like a parse error)."""
