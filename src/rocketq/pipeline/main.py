"""`rocketq pipeline {orders,orders-gen} ...`."""

from __future__ import annotations

import sys

PIPELINES = {
    "orders": ("rocketq.pipeline.orders", "stream order events through Spark: per-status window stats"),
    "orders-gen": ("rocketq.pipeline.orders_gen", "generate order events (created/paid/shipped/completed)"),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: rocketq pipeline {" + ",".join(PIPELINES) + "} [args...]")
        for k, (_, d) in PIPELINES.items():
            print(f"  {k:<12} {d}")
        return 0 if argv else 2
    name = argv[0]
    if name not in PIPELINES:
        print(f"rocketq pipeline: unknown pipeline {name!r}", file=sys.stderr)
        return 2
    import importlib

    return int(importlib.import_module(PIPELINES[name][0]).main(argv[1:]) or 0)
