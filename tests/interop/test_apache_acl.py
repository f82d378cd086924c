"""Apache RocketMQ's own AclClientRPCHook (rocketmq-acl 4.9.8, from Maven Central) against a rocketq
NameServer with authenticationEnabled=true: its signatures are accepted, a wrong secret and an exact replay
are refused, reads stay open. The Java side is tests/interop/apache_acl/AclProbe.java."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rocketq.protocol.codes import ResponseCode
from tests.helpers.procs import start_rocketq

HERE = Path(__file__).parent / "apache_acl"
TOOLS = ("java", "javac", "mvn")
_missing = [t for t in TOOLS if shutil.which(t) is None]
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"needs a JDK and Maven: {_missing} not found")


def _classpath(tmp: Path) -> str:
    out = tmp / "cp.txt"
    subprocess.run(
        ["mvn", "-q", "-B", "-f", str(HERE / "pom.xml"), "dependency:build-classpath",
         f"-Dmdep.outputFile={out}"],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return out.read_text().strip()


def test_apache_signer_against_rocketq_namesrv(tmp_path: Path) -> None:
    cp = _classpath(tmp_path)
    classes = tmp_path / "classes"
    subprocess.run(
        ["javac", "-cp", cp, "-d", str(classes), str(HERE / "AclProbe.java")], check=True, timeout=300
    )
    home = tmp_path / "ns"
    home.mkdir()
    conf = home / "namesrv.conf"
    conf.write_text(
        'authenticationEnabled=true\ninitAuthenticationUser={"username":"ops","password":"ops-pass-1"}\n'
    )
    ns = start_rocketq(
        ["namesrv", "-p", "{port}", "--home", str(home), "-c", str(conf)],
        boot_line="The Name Server boot success",
    )
    try:
        p = subprocess.run(
            ["java", "-cp", f"{classes}:{cp}", "AclProbe", ns.addr, "ops", "ops-pass-1"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        ns.stop()
    got = {}
    for line in p.stdout.splitlines():
        step, _, rest = line.partition(" ")
        code, _, remark = rest.partition(" ")
        if code.lstrip("-").isdigit():
            got[step] = (int(code), remark)
    assert got.get("put_kv", (None,))[0] == ResponseCode.SUCCESS, p.stdout + p.stderr
    assert got["wipe"][0] == ResponseCode.SUCCESS, got
    assert got["wipe_again"][0] != ResponseCode.SUCCESS and "replayed" in got["wipe_again"][1], got
    assert got["route"][0] == ResponseCode.TOPIC_NOT_EXIST, got  # a signed read: answered, not refused
    assert got["put_kv_bad_secret"][0] != ResponseCode.SUCCESS, got
    assert "signature check failed" in got["put_kv_bad_secret"][1], got
    audit = [ln for ln in (home / "logs" / "rocketmqlogs" / "namesrv.log").read_text().splitlines()
             if "rocketq.namesrv.audit" in ln]  # fmt: skip
    assert any("PUT_KV_CONFIG" in ln and "signed by ops" in ln for ln in audit), audit
