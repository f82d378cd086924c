"""Process logs as RocketMQ writes them: ``<home>/logs/rocketmqlogs/namesrv.log`` and ``broker.log``.

Each file rolls over at 128 MiB and keeps 10 old files (``broker.log.1`` ... ``broker.log.10``), as
RocketMQ's logback configuration does. Records at the chosen level (``--log-level`` or $ROCKETQ_LOG_LEVEL,
INFO by default) go to the files; the terminal gets warnings and errors only, plus the boot lines the
processes print on stdout.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys

LOG_SUBDIR = os.path.join("logs", "rocketmqlogs")
MAX_BYTES = 128 * 1024 * 1024
BACKUP_COUNT = 10
FILE_FORMAT = "%(asctime)s %(levelname)s %(threadName)s - %(name)s: %(message)s"
TERMINAL_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_MARK = "_rocketq_process_log"


class LogSetupError(ValueError):
    """A bad --log-level value."""


class _Route(logging.Filter):
    """Keep the records of loggers under ``prefix`` (or, with ``others``, every record outside ``taken``)."""

    def __init__(self, prefix: str | None, taken: tuple[str, ...]) -> None:
        super().__init__()
        self.prefix = prefix
        self.taken = taken

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if self.prefix is not None:
            return name == self.prefix or name.startswith(self.prefix + ".")
        return not any(name == p or name.startswith(p + ".") for p in self.taken)


def announce(logger: logging.Logger, line: str) -> None:
    """A boot or shutdown line: on stdout (scripts and tests wait for it) and in the log file."""
    print(line, flush=True)
    logger.info("%s", line)


def parse_level(level: str) -> int:
    value = logging.getLevelName(level.strip().upper())
    if not isinstance(value, int):
        raise LogSetupError(f"unknown log level {level!r} (DEBUG, INFO, WARNING, ERROR)")
    return value


def log_dir(home: str) -> str:
    return os.path.join(os.path.abspath(os.path.expanduser(home)), LOG_SUBDIR)


def setup_process_logging(home: str, level: str, files: dict[str, str | None]) -> list[str]:
    """Send the process's log records to ``files`` under ``<home>/logs/rocketmqlogs`` and warnings to stderr.

    ``files`` maps a file name to the logger prefix it takes ("rocketq.namesrv"), or to None for every
    record no other file takes. Returns the files' paths; when the directory cannot be written, logging
    stays on the terminal at ``level`` and the reason is logged there.
    """
    numeric = parse_level(level)
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:  # a second call replaces
        root.removeHandler(h)
        h.close()
    root.setLevel(numeric)
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setFormatter(logging.Formatter(TERMINAL_FORMAT))
    setattr(terminal, _HANDLER_MARK, True)
    root.addHandler(terminal)
    directory = log_dir(home)
    taken = tuple(p for p in files.values() if p is not None)
    paths = []
    try:
        os.makedirs(directory, exist_ok=True)
        for name, prefix in files.items():
            path = os.path.join(directory, name)
            handler = logging.handlers.RotatingFileHandler(
                path, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT, encoding="utf-8"
            )
            handler.setFormatter(logging.Formatter(FILE_FORMAT))
            handler.addFilter(_Route(prefix, taken))
            setattr(handler, _HANDLER_MARK, True)
            root.addHandler(handler)
            paths.append(path)
    except OSError as exc:
        logging.getLogger(__name__).warning(
            "logging to the terminal only: cannot write %s: %s", directory, exc
        )
        return paths
    terminal.setLevel(max(numeric, logging.WARNING))
    return paths
