#!/usr/bin/env bash
# promtool (from Debian's prometheus package) into .cache/bin, for the alert rule tests
# (tests/integration/test_metrics_conf.py). Only the one binary is unpacked: installing the package
# would also install and start a Prometheus server. Prints the path; exits non-zero if it cannot.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/.cache/bin/promtool"
if command -v promtool >/dev/null 2>&1; then command -v promtool; exit 0; fi
if [ -x "$DEST" ]; then echo "$DEST"; exit 0; fi
command -v apt-get >/dev/null 2>&1 || { echo "no apt-get: promtool not installed" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
chmod 755 "$TMP"  # apt's download user must be able to write here
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
( cd "$TMP" && { apt-get download -qq prometheus 2>/dev/null || { $SUDO apt-get update -qq && apt-get download -qq prometheus; }; } )
mkdir -p "$(dirname "$DEST")"
dpkg-deb --fsys-tarfile "$TMP"/prometheus_*.deb | tar -x -C "$TMP" ./usr/bin/promtool
mv "$TMP/usr/bin/promtool" "$DEST"
echo "$DEST"
