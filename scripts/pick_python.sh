#!/usr/bin/env bash
# Print the quickest CPython 3.11+ among `python3` on the PATH and the distribution's /usr/bin/python3.
#
# Why: rocketq's broker and client spend most of their CPU in the bytecode interpreter, and interpreter builds
# differ a lot. A version manager's default build (pyenv: no PGO, no LTO, libpython shared) ran pure-Python code
# 1.7x slower here than Debian's /usr/bin/python3.11 (PGO + LTO, libpython linked in), and the broker spent
# about a fifth more CPU per message in the peers benchmark. Each candidate runs the same
# small loop (calls, dict stores, slotted objects: the broker's kind of work) five times, about 0.1 s each, and
# the fastest best run wins; a loop of a few ms picked the slower build one time in three on a busy VM.
# PYTHON=/path/to/python skips the choice.
set -euo pipefail
if [ -n "${PYTHON:-}" ]; then
  echo "$PYTHON"
  exit 0
fi
PROBE='
import sys, time
if sys.version_info < (3, 11):
    sys.exit(1)
import venv, ensurepip  # noqa: F401  (a venv with pip must be possible)
class R:
    __slots__ = ("a", "b")
    def __init__(self, a, b):
        self.a = a
        self.b = b
def f(d, i):
    d[i & 63] = i
    return len(d) + R(i, d).a
best = 1e9
for _ in range(5):
    t = time.perf_counter()
    d = {}
    acc = 0
    for i in range(300_000):
        acc += f(d, i)
    best = min(best, time.perf_counter() - t)
print(best)
'
best_py=""
best_t=""
seen=""
for cand in python3 /usr/bin/python3; do
  exe="$(command -v "$cand" 2>/dev/null)" || continue
  real="$(readlink -f "$exe")"
  case " $seen " in *" $real "*) continue ;; esac
  seen="$seen $real"
  t="$("$exe" -c "$PROBE" 2>/dev/null)" || continue
  if [ -z "$best_t" ] || awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then
    best_py="$exe"
    best_t="$t"
  fi
done
echo "${best_py:-python3}"
