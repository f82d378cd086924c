"""docs/quickstart.md and docs/client.md run as a new user runs them.

The quickstart's first command, `bash scripts/start.sh`, starts the standalone (on free ports and a temp home
instead of 9876 / 10911 / ~/.rocketq). Every other bash block of the page then runs in one bash session whose
PATH does not hold .venv/bin, so the page's `source .venv/bin/activate` is what puts `rocketq`, `mqadmin` and
`python` there; each Python block is saved under the name its first line gives and run by the page's
`python NAME.py`. client.md's blocks then run one by one, in order, against the same standalone.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketq._public import CLIENT_NAMES
from tests.helpers.procs import RocketqProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BOOT = "The broker["
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)


@dataclass
class Started:
    proc: RocketqProcess
    namesrv: str
    broker: str
    home: Path
    work: Path

    def localize(self, text: str) -> str:
        """The page's addresses and paths, as this test started them."""
        return (
            text.replace("127.0.0.1:9876", self.namesrv)
            .replace("127.0.0.1:10911", self.broker)
            .replace("~/.rocketq", str(self.home))
            .replace("source .venv/bin/activate", f"source {ROOT}/.venv/bin/activate")
        )


def _blocks(page: str) -> list[tuple[str, str]]:
    return BLOCK.findall((DOCS / page).read_text())


def _new_user_env() -> dict[str, str]:
    """This environment without the virtualenv on the PATH (as in a fresh terminal)."""
    venv_bin = str(ROOT / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "NAMESRV_ADDR")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    return env


def _bash(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=cwd,
        env=_new_user_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    lang, code = _blocks("quickstart.md")[0]
    assert (lang, code.strip()) == ("bash", "bash scripts/start.sh"), "the quickstart starts with start.sh"
    home = tmp_path_factory.mktemp("quickstart") / "home"
    work = tmp_path_factory.mktemp("quickstart-work")
    ns_port, broker_port = free_port(), free_port()
    args = ["--home", str(home), "--namesrv-port", str(ns_port), "--broker-port", str(broker_port)]
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "start.sh"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**_new_user_env(), "PYTHONUNBUFFERED": "1"},
    )
    rp = RocketqProcess(proc, ns_port, args)
    try:
        rp.wait_for_line(BOOT, timeout=180)  # a fresh checkout's first start installs into .venv first
        yield Started(rp, f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}", home, work)
    finally:
        code = rp.stop(sig=signal.SIGINT)  # Ctrl-C, as the page says
    assert code == 0, rp.output


def test_quickstart_runs_as_written(started: Started) -> None:
    assert "/.venv/bin/activate" in started.proc.output  # start.sh says how to get the commands
    script = []
    for lang, code in _blocks("quickstart.md")[1:]:
        code = started.localize(code)
        if lang == "python":
            name = code.splitlines()[0].removeprefix("# ").strip()
            assert name.endswith(".py"), "a quickstart Python block starts with its file name"
            (started.work / name).write_text(code)
        elif lang == "bash":
            script.append(code)
    out = _bash("\n".join(script), started.work, timeout=300)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    text = out.stdout
    assert re.search(r"^rocketq \d+\.\d+", text, re.M), text
    assert len(re.findall(r"^SEND_OK [0-9A-F]{32} \d \d+$", text, re.M)) == 10, text
    consumed = {" ".join(ln.split()[-2:]) for ln in text.splitlines()}  # consume.py: ... hello N
    assert {f"hello {i}" for i in range(10)} <= consumed, text
    assert "ORDER-X" in text  # queryMsgByKey found the message sendMessage sent
    assert "broker.log" in text and "namesrv.log" in text
    size = re.search(r"^(\d+(?:\.\d+)?)([KMG])\s+\S*store$", text, re.M)
    assert size, text
    mib = float(size.group(1)) * {"K": 1 / 1024, "M": 1, "G": 1024}[size.group(2)]
    assert mib < 200, f"the standalone store takes {mib:.0f} MiB"


def test_every_public_client_class_has_an_example_in_client_md() -> None:
    code = "\n".join(c for lang, c in _blocks("client.md") if lang == "python")
    missing = [name for name in CLIENT_NAMES if not re.search(rf"\b{name}\b", code)]
    assert missing == [], f"docs/client.md has no example using {missing}"


# what a block must print, besides exiting 0
EXPECTED = {
    "print(matched)": "['250']",
    "print(reply.body)": "b'pong: ping'",
    "MQBrokerError as e": "broker: 13",
}


def test_client_md_runs_as_written(started: Started) -> None:
    activate = f"source {ROOT}/.venv/bin/activate\n"
    ran = 0
    for i, (lang, code) in enumerate(_blocks("client.md")):
        code = started.localize(code)
        if lang == "python":
            (started.work / f"client_example_{i}.py").write_text(code)
            out = _bash(activate + f"python client_example_{i}.py", started.work, timeout=180)
        elif lang == "bash":
            out = _bash(activate + code, started.work, timeout=120)
        else:
            continue
        assert out.returncode == 0, (
            f"block {i} of client.md failed:\n{code}\n{out.stdout[-3000:]}{out.stderr[-5000:]}"
        )
        for marker, expected in EXPECTED.items():
            if marker in code:
                assert expected in out.stdout, f"block {i}: expected {expected!r}:\n{out.stdout[-3000:]}"
        ran += 1
    assert ran >= 9
