"""`rocketq` entry point: dispatches to each process's own ``main(argv)``.

Each subcommand lives in the module that owns it, so that e.g. ``rocketq namesrv`` imports
nothing of the broker.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> "module:function"; each function takes argv (list[str]) and returns an exit code.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "namesrv": ("rocketq.namesrv.main:main", "run a NameServer"),
    "broker": ("rocketq.broker.main:main", "run a Broker"),
    "standalone": ("rocketq.standalone:main", "run NameServer + Broker in one process"),
    "cluster": ("rocketq.cluster:main", "run every process of a deployment mode (2m-2s-sync, ...)"),
    "admin": ("rocketq.admin.main:main", "mqadmin commands"),
    "console": ("rocketq.console.main:main", "the web console for a cluster"),
    "pipeline": ("rocketq.pipeline.main:main", "Spark pipelines: orders, orders-gen"),
    "bench": ("rocketq.bench_cli:main", "benchmarks"),
}

# subcommands that run a broker (event loop + store threads): they get the broker's interpreter settings
BROKER_COMMANDS = frozenset(("broker", "standalone"))

EXAMPLES = """\
examples:
  rocketq standalone              NameServer 127.0.0.1:9876 + Broker 127.0.0.1:10911, data in ~/.rocketq
  rocketq namesrv -p 9876         a NameServer on its own
  rocketq broker -n 127.0.0.1:9876 -c broker.conf
  rocketq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t TopicTest -r 4 -w 4
  rocketq admin clusterList -n 127.0.0.1:9876
  rocketq console -n 127.0.0.1:9876 --port 8080   the web console (standalone serves it on 8080 already)
  rocketq admin                   every mqadmin command (`rocketq admin CMD -h`: one command's flags)
  rocketq COMMAND -h              the options of a command

docs: docs/quickstart.md, docs/configuration.md, docs/mqadmin.md (in the source tree)"""

USAGE = (
    "usage: rocketq [--version] {"
    + ",".join(SUBCOMMANDS)
    + "} [args...]\n\n"
    + "\n".join(f"  {name:<12} {desc}" for name, (_, desc) in SUBCOMMANDS.items())
    + "\n\n"
    + EXAMPLES
)


def _run(target: str, argv: list[str]) -> int:
    if target in (SUBCOMMANDS[c][0] for c in BROKER_COMMANDS):
        from rocketq.runtime import apply_broker_runtime

        apply_broker_runtime()
    module_name, func_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(f"rocketq: {target} is not available in this build", file=sys.stderr)
            return 2
        raise
    return int(getattr(module, func_name)(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] in ("--version", "-V", "version"):
        from rocketq import __version__

        print(f"rocketq {__version__}")
        return 0
    name = args.pop(0)
    if name not in SUBCOMMANDS:
        print(f"rocketq: unknown command {name!r}\n{USAGE}", file=sys.stderr)
        return 2
    return _run(SUBCOMMANDS[name][0], args)


def mqnamesrv() -> int:
    return _run(SUBCOMMANDS["namesrv"][0], sys.argv[1:])


def mqbroker() -> int:
    return _run(SUBCOMMANDS["broker"][0], sys.argv[1:])


def mqadmin() -> int:
    return _run(SUBCOMMANDS["admin"][0], sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
