"""The code layout DESIGN.md and docs/architecture.md describe, checked on the source (no imports run).

- layers: each package of src/rocketq imports only the packages LAYERS allows (DESIGN.md's dependency
  direction); a new package needs a line in LAYERS;
- no import cycles between modules, counting every import (module level, inside functions, under
  TYPE_CHECKING): a cycle hidden in a function or an annotation is still two modules that cannot be
  understood, tested or moved apart;
- a module over 600 lines says why at its top (a first line starting "# Over 600 lines").
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Shared helpers any layer may use (they import nothing else of rocketq).
UTILITIES = {"atomic_file", "dirlock", "runtime", "logs"}

# package -> the packages it may import (besides itself and UTILITIES). DESIGN.md: protocol <- remoting <-
# {namesrv, broker, ha, controller, client, proxy, admin}; store <- {ha, broker}; ha <- broker;
# filter <- {protocol, store, broker, client} (filter is a leaf: tag hashing and SQL92 only);
# client <- {admin, console, spark, proxy}; metrics <- {broker, namesrv, proxy}.
LAYERS: dict[str, set[str]] = {
    "filter": set(),
    "protocol": {"filter"},
    "remoting": {"protocol"},
    "store": {"protocol", "filter"},
    "metrics": {"protocol", "remoting"},
    "ha": {"protocol", "remoting", "store"},
    "controller": {"protocol", "remoting", "metrics"},
    "namesrv": {"protocol", "remoting", "controller", "metrics"},
    "broker": {"protocol", "remoting", "store", "filter", "ha", "metrics"},
    "client": {"protocol", "remoting", "filter"},
    "proxy": {"protocol", "remoting", "filter", "client", "metrics"},
    "admin": {"protocol", "remoting", "client"},
    "console": {"protocol", "remoting", "client", "admin", "metrics"},
    "spark": {"protocol", "remoting", "filter", "client"},
    "pipeline": {"protocol", "client", "spark"},
    "logging": {"protocol", "remoting", "client"},  # rocketq.logging.RocketMQHandler sends with the client
}
# the public client facade (`import rocketq`, rocketq.aio) belongs to the client layer
FACADE = {"rocketq", "_public", "aio"}
# entry points: they wire processes together and may import any layer; nothing imports them
ENTRY_POINTS = {"cli", "standalone", "bench_cli", "cluster"}

MAX_LINES = 600
LONG_MODULE_MARK = "# Over 600 lines"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted((SRC / "rocketq").rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def _imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the rocketq modules it imports anywhere in its source."""

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(
                        parts[: len(parts) - node.level + 1] + ([node.module] if node.module else [])
                    )
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                if t.split(".")[0] != "rocketq":
                    continue
                found = known(t)
                if found and found != mod:
                    edges[mod].add(found)
    return edges


def _layer(mod: str) -> str:
    parts = mod.split(".")
    top = parts[1] if len(parts) > 1 else "rocketq"
    return "client" if top in FACADE else top


def test_layers_import_only_downward() -> None:
    mods = _modules()
    known_layers = set(LAYERS) | UTILITIES | ENTRY_POINTS | {"client"}
    unknown = sorted({_layer(m) for m in mods} - known_layers)
    assert not unknown, (
        f"new top-level package(s) {unknown}: give each a line in LAYERS (tests/unit/{Path(__file__).name})"
    )
    bad = []
    for mod, targets in _imports(mods).items():
        src = _layer(mod)
        if src in ENTRY_POINTS:
            continue
        for t in targets:
            dst = _layer(t)
            if dst == src or dst in UTILITIES:
                continue
            if dst in ENTRY_POINTS or src in UTILITIES or dst not in LAYERS.get(src, set()):
                bad.append(f"{mod} -> {t}  ({src} may import {sorted(LAYERS.get(src, set()))})")
    assert not bad, "imports against the layer order (DESIGN.md):\n" + "\n".join(sorted(bad))


def test_layer_table_is_acyclic() -> None:
    seen: dict[str, int] = {}

    def visit(layer: str, path: list[str]) -> None:
        assert seen.get(layer) != 1, f"layer cycle: {' -> '.join([*path, layer])}"
        if seen.get(layer) == 2:
            return
        seen[layer] = 1
        for dep in LAYERS.get(layer, set()):
            visit(dep, [*path, layer])
        seen[layer] = 2

    for layer in LAYERS:
        visit(layer, [])


def test_no_import_cycles() -> None:
    edges = _imports(_modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strongconnect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in list(edges):
        if v not in index:
            strongconnect(v)
    assert not cycles, "modules that import each other (directly or around a loop):\n" + "\n".join(
        ", ".join(c) for c in cycles
    )


def test_long_modules_say_why() -> None:
    long = []
    for path in _modules().values():
        lines = path.read_text().splitlines()
        if len(lines) > MAX_LINES and not lines[0].startswith(LONG_MODULE_MARK):
            long.append(f"{path.relative_to(SRC)} ({len(lines)} lines)")
    assert not long, (
        f"modules over {MAX_LINES} lines: split them, or start them with a line "
        f"'{LONG_MODULE_MARK}: <why>':\n" + "\n".join(long)
    )
