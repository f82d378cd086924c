"""Process logs: <home>/logs/rocketmqlogs/<name>.log, routed by logger, rolling, warnings on the terminal."""

from __future__ import annotations

import logging
import logging.handlers
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq import logs


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    yield
    for h in root.handlers:
        if h not in saved[1]:
            h.close()
    root.handlers[:] = saved[1]
    root.setLevel(saved[0])


def test_records_go_to_their_file_and_warnings_to_the_terminal(
    tmp_path: Path, root_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = logs.setup_process_logging(
        str(tmp_path), "info", {"namesrv.log": "rocketq.namesrv", "broker.log": None}
    )
    assert paths == [
        str(tmp_path / "logs/rocketmqlogs/namesrv.log"),
        str(tmp_path / "logs/rocketmqlogs/broker.log"),
    ]
    logging.getLogger("rocketq.namesrv.processor").info("route asked")
    logging.getLogger("rocketq.broker.controller").info("registered")
    logging.getLogger("rocketq.store.flush").warning("slow flush")
    logging.getLogger("rocketq.broker").debug("below the level")
    for h in logging.getLogger().handlers:
        h.flush()
    namesrv = (tmp_path / "logs/rocketmqlogs/namesrv.log").read_text()
    broker = (tmp_path / "logs/rocketmqlogs/broker.log").read_text()
    assert "route asked" in namesrv and "registered" not in namesrv
    assert "registered" in broker and "slow flush" in broker and "route asked" not in broker
    assert "below the level" not in broker
    assert " INFO MainThread - rocketq.broker.controller: registered" in broker
    err = capsys.readouterr().err
    assert "slow flush" in err and "registered" not in err  # the terminal: warnings and errors only


def test_files_roll_over_as_rocketmq_configures_them(tmp_path: Path, root_logging: None) -> None:
    logs.setup_process_logging(str(tmp_path), "WARNING", {"broker.log": None})
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.handlers.RotatingFileHandler)]
    assert [(h.maxBytes, h.backupCount) for h in files] == [(128 * 1024 * 1024, 10)]
    assert logging.getLogger().level == logging.WARNING
    logs.setup_process_logging(str(tmp_path), "DEBUG", {"broker.log": None})  # a second call replaces
    assert (
        len([h for h in logging.getLogger().handlers if isinstance(h, logging.handlers.RotatingFileHandler)])
        == 1
    )


def test_a_bad_level_is_a_clear_error(tmp_path: Path, root_logging: None) -> None:
    with pytest.raises(logs.LogSetupError, match="unknown log level 'LOUD'"):
        logs.setup_process_logging(str(tmp_path), "LOUD", {"broker.log": None})


def test_an_unwritable_home_leaves_logging_on_the_terminal(
    tmp_path: Path, root_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert logs.setup_process_logging(str(blocker), "INFO", {"broker.log": None}) == []
    logging.getLogger("rocketq.broker").info("still visible")
    err = capsys.readouterr().err
    assert "cannot write" in err and "still visible" in err
