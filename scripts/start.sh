#!/usr/bin/env bash
# Install rocketq into .venv and start the embedded default: NameServer + Broker, data under ~/.rocketq.
# Arguments go to `rocketq standalone` (--home DIR, --namesrv-port, --broker-port, -c broker.conf).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cat >&2 <<EOF
rocketq is installed in $ROOT/.venv. In another terminal, put its commands (rocketq, mqadmin, and the
python that imports rocketq) on the PATH with:
    source $ROOT/.venv/bin/activate
Stop the broker with Ctrl-C. Logs: <home>/logs/rocketmqlogs/ (home: ~/.rocketq unless --home says otherwise).
EOF
exec "$ROOT/.venv/bin/rocketq" standalone "$@"
