#!/usr/bin/env bash
# Install everything (Python packages, npm packages for interop tests) and run lint + all tests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ROCKETQ_EXTRAS="[dev]" bash scripts/bootstrap.sh
if [ -f tests/interop/node/package.json ] && command -v npm >/dev/null 2>&1; then
  (cd tests/interop/node && npm install --no-audit --no-fund --loglevel=error)
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/pytest -q "$@"
