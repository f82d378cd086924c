"""`rocketq bench peers [--smoke] [--reps 3] [--out docs/benchmarks.md]`: a thin wrapper that runs the
side-by-side benchmark in the source tree's bench/peers (not shipped in the wheel).
`rocketq bench read-crc [--smoke] [--e2e]`: what the body CRC check costs on the read path
(bench/read_crc_bench.py).
`rocketq bench fuzz` / `rocketq bench guard`: decoder fuzzing and the remoting attacks (docs/security.md).
`rocketq bench ha [failover] [...]`: replication (bench/ha_bench.py, bench/ha_campaign.py)."""

from __future__ import annotations

import os
import sys

USAGE = (
    "usage: rocketq bench peers [--smoke] [--reps N] [--out docs/benchmarks.md] [--json FILE] (see --help)\n"
    "       rocketq bench read-crc [--smoke] [--e2e] [--n N] [--runs R] [--sizes 128,1024,16384]\n"
    "       rocketq bench fuzz [--seconds 60] [--targets A,B] [--smoke]   (coverage-guided, atheris)\n"
    "       rocketq bench guard [--conns 100] [--held-mib 15] [--smoke]   (memory/connection attacks)\n"
    "       rocketq bench ha [--smoke] [--reps N] [--seconds S] [--gap-mib M] [--json FILE]\n"
    "       rocketq bench ha failover [--rounds 20] [--role SYNC_MASTER|ASYNC_MASTER] [--json FILE]"
)
# benchmarks that are one script under bench/ with a main(argv)
_SCRIPTS = {
    "read-crc": "bench.read_crc_bench",
    "fuzz": "bench.fuzz_bench",
    "guard": "bench.remoting_guard_bench",
    "ha": "bench.ha_bench",
}


def _repo_root() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.dirname(os.path.dirname(here)), os.getcwd()):
        if os.path.isfile(os.path.join(root, "bench", "peers", "harness.py")):
            return root
    return None


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] not in ("peers", *_SCRIPTS):
        print(f"rocketq bench: unknown benchmark {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    root = _repo_root()
    if root is None:
        print(f"rocketq bench {argv[0]}: needs a source checkout (bench/ not found)", file=sys.stderr)
        return 2
    if root not in sys.path:
        sys.path.insert(0, root)
    if argv[0] in _SCRIPTS:
        import importlib

        return importlib.import_module(_SCRIPTS[argv[0]]).main(argv[1:])
    from bench.peers.harness import main as peers_main

    return peers_main(argv[1:])
