#!/usr/bin/env bash
# Create .venv (once) and install rocketq into it. Sourced by start.sh and test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  "$PY" -m venv "$ROOT/.venv"
fi
"$ROOT/.venv/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT${ROCKETQ_EXTRAS:-}"
