"""The docs stay in step with the code: every broker.conf key (with its default) and every mqadmin command."""

from __future__ import annotations

import re
from pathlib import Path

from rocketq.admin.main import COMMANDS
from rocketq.broker.config import _KEYS, known_keys

DOCS = Path(__file__).resolve().parents[2] / "docs"
ROW = re.compile(r"^\| `([A-Za-z0-9]+)` \| (.*?) \|", re.M)


def _broker_rows() -> dict[str, str]:
    text = (DOCS / "configuration.md").read_text()
    broker_part = text.split("## NameServer")[0]
    return dict(ROW.findall(broker_part))


def _fmt(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def test_every_broker_key_is_documented_with_its_default() -> None:
    rows = _broker_rows()
    assert sorted(set(known_keys()) - set(rows)) == [], "keys missing from docs/configuration.md"
    assert sorted(set(rows) - set(known_keys())) == [], "docs/configuration.md lists keys the broker rejects"
    for key, cell in rows.items():
        m = re.fullmatch(r"`([^`]*)`", cell.strip())
        if m and _KEYS[key][1] != "":  # a literal default: must be the code's (empty ones are derived)
            assert m.group(1) == _fmt(_KEYS[key][1]), f"default of {key} in docs: {m.group(1)!r}"


def test_every_mqadmin_command_is_documented() -> None:
    text = (DOCS / "mqadmin.md").read_text()
    missing = [name for name in COMMANDS if f"`{name}`" not in text]
    assert missing == []
