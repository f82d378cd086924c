"""The docs stay in step with the code: every broker.conf key (with its default) and every mqadmin command
(docs/quickstart.md and docs/client.md run in tests/docs)."""

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


def test_topic_name_rule_is_the_same_in_help_docs_and_code() -> None:
    import io

    from rocketq.admin.cmd_topic import TOPIC_MAX_LEN, TOPIC_RE
    from rocketq.admin.main import main

    out = io.StringIO()
    assert main(["help", "updateTopic"], out=out) == 0  # what `updateTopic -h` prints
    help_text = " ".join(out.getvalue().split())
    pattern = TOPIC_RE.pattern
    assert f"{pattern}, at most {TOPIC_MAX_LEN} characters" in help_text
    row = next(
        ln for ln in (DOCS / "mqadmin.md").read_text().splitlines() if ln.startswith("| `updateTopic`")
    )
    assert f"`{pattern.replace('|', chr(92) + '|')}`, ≤ {TOPIC_MAX_LEN} characters" in row
