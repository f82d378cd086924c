#!/usr/bin/env bash
# Install everything (Python packages, npm packages for interop tests) and run lint, type check + all tests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
if ! command -v java >/dev/null 2>&1; then  # the Spark tests need a JVM
  (sudo -n true 2>/dev/null && SUDO=sudo || SUDO=""; $SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jre-headless)
fi
ROCKETQ_EXTRAS="[dev,spark]" bash scripts/bootstrap.sh
# promtool (Debian's prometheus package, the one binary) checks the shipped alert rules
bash scripts/install_promtool.sh >/dev/null || echo "promtool not installed: the alert rules get the YAML check only"
if [ -f tests/interop/node/package.json ] && command -v npm >/dev/null 2>&1; then
  (cd tests/interop/node && npm install --no-audit --no-fund --loglevel=error)
fi
# the broker refuses writes past 90 % used (RocketMQ's guard); tests pin it, but say what CI ran on
echo "temp disk (used, available, use%): $(df -h --output=used,avail,pcent "${TMPDIR:-/tmp}" | tail -1)"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python scripts/typecheck.py  # mypy on src/: no error beyond scripts/mypy-baseline.txt
exec .venv/bin/pytest -q "$@"
