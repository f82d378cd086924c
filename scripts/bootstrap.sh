#!/usr/bin/env bash
# Create .venv (once) and install rocketq into it. Sourced by start.sh and test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  # the quickest Python 3.11+ here (PYTHON=... overrides): see pick_python.sh
  PY="$(bash "$ROOT/scripts/pick_python.sh")"
  echo "creating .venv with $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))" >&2
  "$PY" -m venv "$ROOT/.venv"
fi
# The install is editable, so only pyproject.toml (dependencies, entry points) or new extras need pip again:
# .venv/.rocketq-installed remembers what was installed (one "pyproject-hash extras" line per install).
EXTRAS="${ROCKETQ_EXTRAS:-}"
STAMP="$ROOT/.venv/.rocketq-installed"
HASH="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [ -x "$ROOT/.venv/bin/rocketq" ] && [ -f "$STAMP" ]; then
  if grep -qxF "$HASH ${EXTRAS:-[]}" "$STAMP"; then
    exit 0
  fi
  if [ -z "$EXTRAS" ] && grep -q "^$HASH " "$STAMP"; then
    exit 0  # any install of this pyproject.toml includes the base package
  fi
fi
"$ROOT/.venv/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT$EXTRAS"
echo "$HASH ${EXTRAS:-[]}" >> "$STAMP"
