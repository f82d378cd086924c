"""Type-check src/rocketq with mypy against a baseline that may only shrink.

    .venv/bin/python scripts/typecheck.py           # CI (scripts/test.sh): errors not in the baseline fail
    .venv/bin/python scripts/typecheck.py --update  # after fixing errors: rewrite the (smaller) baseline

The baseline (scripts/mypy-baseline.txt) counts the errors mypy reported when checking began, per file, error
code and message, without line numbers, so editing a file does not move its entries. A change that adds an
error fails; a change that fixes one passes and says so, and --update writes the smaller baseline.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "scripts" / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<msg>.*?)(?:  \[(?P<code>[\w-]+)\])?$")


def current_errors() -> Counter[str]:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context", "--no-pretty"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode not in (0, 1) or (out.returncode == 1 and not out.stdout.strip()):
        sys.exit(f"mypy did not run:\n{out.stdout}{out.stderr}")
    errors: Counter[str] = Counter()
    for line in out.stdout.splitlines():
        m = ERROR.match(line)
        if m:
            msg = re.sub(r"\bline \d+\b", "line N", m["msg"])  # "defined on line 12" moves with edits
            errors[f"{m['path']}: [{m['code'] or 'misc'}] {msg}"] += 1
    return errors


def read_baseline() -> Counter[str]:
    counts: Counter[str] = Counter()
    if BASELINE.exists():
        for line in BASELINE.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                n, _, key = line.partition(" ")
                counts[key] = int(n)
    return counts


def write_baseline(counts: Counter[str]) -> None:
    lines = [
        "# mypy errors src/rocketq had when type checking began; scripts/typecheck.py fails on any error",
        "# not counted here. Fix errors, then run `scripts/typecheck.py --update`: it only shrinks.",
    ]
    lines += [f"{n} {key}" for key, n in sorted(counts.items()) if n > 0]
    BASELINE.write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    now = current_errors()
    base = read_baseline()
    new = {key: n - base[key] for key, n in now.items() if n > base[key]}
    fixed = sum(n - now[key] for key, n in base.items() if n > now[key])
    if "--update" in argv:
        if new and BASELINE.exists():
            print("not updating: fix the new errors first (the baseline only shrinks)", file=sys.stderr)
        else:
            kept = Counter({k: min(n, base[k]) for k, n in now.items()})
            write_baseline(now if not BASELINE.exists() else kept)
            print(f"{BASELINE.relative_to(ROOT)}: {sum(now.values())} errors")
            return 0
    if new:
        where = BASELINE.relative_to(ROOT)
        print(f"mypy: {sum(new.values())} new error(s) (not in {where}):", file=sys.stderr)
        for key, n in sorted(new.items()):
            print(f"  {n} × {key}", file=sys.stderr)
        print("run `.venv/bin/mypy` for their lines", file=sys.stderr)
        return 1
    note = f"; {fixed} fixed since the baseline: run scripts/typecheck.py --update" if fixed else ""
    print(f"mypy: {sum(now.values())} known errors, none new{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
