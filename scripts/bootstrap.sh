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
"$ROOT/.venv/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT${ROCKETQ_EXTRAS:-}"
