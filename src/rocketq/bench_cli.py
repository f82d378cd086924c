"""`rocketq bench SUITE [args]`: run one of the benchmark suites of the source tree's bench/ (not shipped in
the wheel). Each suite is the one whose figures docs/benchmarks.md shows under the same name; `pair` is the
profiling helper that compares rocketq and a peer on one cell. `rocketq bench SUITE --help` lists a suite's
options."""

from __future__ import annotations

import os
import runpy
import sys

# suite -> (script under bench/, or a module for the peers harness; what it measures)
SUITES: dict[str, tuple[str, str]] = {
    "peers": (
        "bench.peers",
        "rocketq against Redis, RabbitMQ, NATS, beanstalkd (about an hour; --smoke: CI)",
    ),
    "client": ("client_bench.py", "the Python client against a standalone broker: msg/s, latency, CPU"),
    "store": ("store_bench.py", "the store alone: append, read and recovery against the disk's limits"),
    "remoting": ("remoting_bench.py", "remoting round trips against a bare asyncio echo server"),
    "spark": ("spark_bench.py", "the Spark connector: sink and source rows/s against Parquet"),
    "read-crc": ("read_crc_bench.py", "what the body CRC check costs on the read path (broker, client)"),
    "guard": ("remoting_guard_bench.py", "the remoting layer under memory and connection attacks"),
    "fuzz": ("fuzz_bench.py", "coverage-guided fuzzing of the protocol decoders (atheris)"),
    "pair": ("peer_pair.py", "profiling helper: one cell, rocketq and peers interleaved, CPU per message"),
    "metrics": ("metrics_bench.py", "what the metrics exporter costs the send path, and one scrape"),
    "send-path": (
        "send_path_bench.py",
        "the broker's CPU per SEND_MESSAGE_V2 in process; --ab compares two trees",
    ),
    "ha": ("ha_bench.py", "replication: a slave's cost, lag, catch-up; `ha failover`: kill -9 rounds"),
}

USAGE = (
    "usage: rocketq bench SUITE [args...]   (rocketq bench SUITE --help: the suite's options)\n\n"
    + "\n".join(f"  {name:<9} {what}" for name, (_, what) in SUITES.items())
    + "\n\nMethod, tables and current figures: docs/benchmarks.md"
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
    name, args = argv[0], argv[1:]
    if name not in SUITES:
        print(f"rocketq bench: unknown suite {name!r}\n{USAGE}", file=sys.stderr)
        return 2
    root = _repo_root()
    if root is None:
        print("rocketq bench: needs a source checkout (bench/ not found)", file=sys.stderr)
        return 2
    if root not in sys.path:
        sys.path.insert(0, root)
    saved = sys.argv
    sys.argv = [f"rocketq bench {name}", *args]
    try:
        if name == "peers":
            from bench.peers.harness import main as peers_main

            return peers_main(args)
        runpy.run_path(os.path.join(root, "bench", SUITES[name][0]), run_name="__main__")
    except SystemExit as exc:  # the suites' argparse (--help, bad flags) and their own exit codes
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved
    return 0
