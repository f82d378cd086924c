#!/usr/bin/env bash
# Install rocketq into .venv and start the embedded default: NameServer + Broker, data under ~/.rocketq.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
exec "$ROOT/.venv/bin/rocketq" standalone "$@"
