"""Coverage-guided fuzzing of every decoder of network or disk bytes (tests/fuzz/targets.py) with atheris.

    python bench/fuzz_bench.py [--seconds 60] [--targets frame.stream,record.commitlog] [--smoke] [--json F]
    rocketq bench fuzz ...

Each target runs in its own child process (atheris keeps its coverage map per process) for ``--seconds``,
started from the target's seeds, with libFuzzer's hang limit (``-timeout``) and input size cap. A finding is
an exception other than ValueError (the decoders' clean refusal), a hang, or a crash; its input is saved
under ``--artifacts`` (default bench/fuzz-artifacts/, reproduce with ``--reproduce FILE --targets NAME``).
Prints a markdown table for docs/benchmarks.md: runs, execs/s, coverage (libFuzzer's ``cov`` edges and
``ft`` features at the end), corpus size, findings. Needs ``pip install atheris`` (the ``fuzz`` extra);
without it the same targets run under hypothesis for the same time, without coverage guidance.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@dataclass
class Outcome:
    target: str
    engine: str
    seconds: float = 0.0
    runs: int = 0
    execs_per_s: float = 0.0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    findings: int = 0
    finding: str = ""


# -- child: one target under atheris --------------------------------------------------------------
def _child(name: str, argv: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["rocketq"]):
        from tests.fuzz.targets import TARGETS, run_one

    t = TARGETS[name]

    def one(data: bytes) -> None:
        run_one(t, data)

    atheris.Setup([sys.argv[0], *argv], one)
    atheris.Fuzz()


def _parse_libfuzzer(out: str, o: Outcome) -> None:
    stats = re.findall(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", out)
    if stats:
        runs, cov, ft, corp = stats[-1]
        o.runs, o.cov, o.ft, o.corpus = int(runs), int(cov), int(ft), int(corp)
    done = re.search(r"Done (\d+) runs in (\d+) second", out)
    if done:
        o.runs = max(o.runs, int(done.group(1)))
    if "ERROR: libFuzzer" in out or "Uncaught Python exception" in out or "==ERROR" in out:
        o.findings = 1
        m = re.search(r"(Uncaught Python exception:.*?)\n\n", out, re.S) or re.search(r"(ERROR: .*)", out)
        o.finding = (m.group(1) if m else "crash")[-600:]


def run_atheris(name: str, seconds: float, artifacts: str, max_len: int) -> Outcome:
    from tests.fuzz.targets import TARGETS

    o = Outcome(name, "atheris")
    with tempfile.TemporaryDirectory(prefix="rq-fuzz-") as corpus:
        for i, seed in enumerate(TARGETS[name].seeds):
            with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
                f.write(seed)
        os.makedirs(artifacts, exist_ok=True)
        args = [
            f"-max_total_time={int(max(1, seconds))}",
            "-timeout=10",
            f"-max_len={max_len}",
            "-print_final_stats=1",
            f"-artifact_prefix={os.path.join(artifacts, name)}-",
            corpus,
        ]
        t0 = time.monotonic()
        p = subprocess.run(
            [sys.executable, __file__, "--child", name, "--", *args],
            capture_output=True,
            text=True,
            timeout=seconds + 120,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])},
        )
        o.seconds = time.monotonic() - t0
        _parse_libfuzzer(p.stdout + p.stderr, o)
        if p.returncode not in (0,) and not o.findings:
            o.findings, o.finding = 1, (p.stderr or p.stdout)[-600:]
    o.execs_per_s = o.runs / o.seconds if o.seconds else 0.0
    return o


def run_hypothesis(name: str, seconds: float) -> Outcome:
    """The fallback without atheris: random and seed-mutated inputs for ``seconds``, no coverage guidance."""
    import random

    from tests.fuzz.targets import TARGETS, run_one

    t = TARGETS[name]
    o = Outcome(name, "random")
    rnd = random.Random(0)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if t.seeds and rnd.random() < 0.7:
            data = bytearray(rnd.choice(t.seeds))
            for _ in range(rnd.randint(1, 4)):
                if data:
                    data[rnd.randrange(len(data))] = rnd.randrange(256)
        else:
            data = bytearray(rnd.randbytes(rnd.randint(0, 256)))
        try:
            run_one(t, bytes(data))
        except Exception as exc:  # a finding
            o.findings += 1
            o.finding = o.finding or f"{type(exc).__name__}: {exc} on {bytes(data)[:64]!r}"
        o.runs += 1
    o.seconds = time.monotonic() - t0
    o.execs_per_s = o.runs / o.seconds
    return o


def table(outcomes: list[Outcome]) -> str:
    rows = [
        "| target | engine | seconds | runs | execs/s | cov (edges) | ft | corpus | findings |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        rows.append(
            f"| {o.target} | {o.engine} | {o.seconds:.0f} | {o.runs} | {o.execs_per_s:.0f} | {o.cov} "
            f"| {o.ft} "
            f"| {o.corpus} | {o.findings} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        name = argv[1]
        rest = argv[argv.index("--") + 1 :] if "--" in argv else []
        _child(name, rest)
        return 0
    p = argparse.ArgumentParser(prog="rocketq bench fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="per target")
    p.add_argument("--targets", default="", help="comma-separated target names (default: all)")
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--artifacts", default=os.path.join(ROOT, "bench", "fuzz-artifacts"))
    p.add_argument("--smoke", action="store_true", help="2 s per target: checks that numbers come out")
    p.add_argument("--engine", choices=("auto", "atheris", "random"), default="auto")
    p.add_argument("--reproduce", help="run one saved input against --targets NAME and show the exception")
    p.add_argument("--json", help="write the outcomes as JSON here")
    a = p.parse_args(argv)
    from tests.fuzz.targets import TARGETS

    names = [n.strip() for n in a.targets.split(",") if n.strip()] or sorted(TARGETS)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        print(f"unknown targets {unknown}; known: {', '.join(sorted(TARGETS))}", file=sys.stderr)
        return 2
    if a.reproduce:
        with open(a.reproduce, "rb") as f:
            data = f.read()
        from tests.fuzz.targets import run_one

        run_one(TARGETS[names[0]], data)  # raises the finding's exception
        print("no finding: the input is refused cleanly now")
        return 0
    seconds = 2.0 if a.smoke else a.seconds
    engine = a.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            print("atheris is not installed (pip install atheris): running without coverage guidance")
            engine = "random"
    outcomes = []
    for name in names:
        if engine == "atheris":
            o = run_atheris(name, seconds, a.artifacts, a.max_len)
        else:
            o = run_hypothesis(name, seconds)
        outcomes.append(o)
        print(f"{name}: {o.runs} runs, {o.execs_per_s:.0f}/s, cov {o.cov}, findings {o.findings}", flush=True)
    print(table(outcomes))
    for o in outcomes:
        if o.findings:
            print(f"\nFINDING in {o.target}:\n{o.finding}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([asdict(o) for o in outcomes], f, indent=2)
    return 1 if any(o.findings for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
