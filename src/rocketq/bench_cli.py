"""`rocketq bench peers [--smoke] [--reps 3] [--out docs/benchmarks.md]` and `rocketq bench ha [...]`: thin
wrappers that run the benchmarks in the source tree's bench/ (not shipped in the wheel): the side-by-side
peers benchmark, and replication (bench/ha_bench.py, bench/ha_campaign.py)."""

from __future__ import annotations

import os
import sys

USAGE = (
    "usage: rocketq bench peers [--smoke] [--reps N] [--out docs/benchmarks.md] [--json FILE] (see --help)\n"
    "       rocketq bench ha [--smoke] [--reps N] [--seconds S] [--gap-mib M] [--json FILE]\n"
    "       rocketq bench ha failover [--rounds 20] [--role SYNC_MASTER|ASYNC_MASTER] [--json FILE]"
)


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
    if argv[0] not in ("peers", "ha"):
        print(f"rocketq bench: unknown benchmark {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    root = _repo_root()
    if root is None:
        print(f"rocketq bench {argv[0]}: needs a source checkout (bench/ not found)", file=sys.stderr)
        return 2
    if root not in sys.path:
        sys.path.insert(0, root)
    if argv[0] == "ha":
        from bench.ha_bench import main as ha_main

        return ha_main(argv[1:])
    from bench.peers.harness import main as peers_main

    return peers_main(argv[1:])
