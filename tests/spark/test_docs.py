"""docs/spark.md runs as written: its bash blocks (mqadmin, with this test's NameServer) and Python blocks,
in order and in one namespace, on the test SparkSession (the page's getOrCreate() returns it)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.interop.standalone import mqadmin_ok

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_spark_md_runs_as_written(spark, rmq) -> None:
    ns: dict = {}
    ran = 0
    for lang, code in re.findall(r"```(\w*)\n(.*?)```", (DOCS / "spark.md").read_text(), re.S):
        code = code.replace("127.0.0.1:9876", rmq.namesrv)
        if lang == "bash":
            for line in code.splitlines():
                if line.startswith("rocketq admin "):
                    argv = shlex.split(line, comments=True)[2:]
                    i = argv.index("-n")
                    mqadmin_ok(rmq.namesrv, argv[0], *argv[1:i], *argv[i + 2 :])
                    ran += 1
        elif lang == "python":
            exec(compile(code, "docs/spark.md", "exec"), ns)
            ran += 1
    assert ran >= 7
    assert ns["spark"] is spark  # the page's session is the running one, not a second JVM
    assert spark.read.parquet(ns["output"]).count() == 4  # the four orders the page wrote
    events = spark.read.format("rocketmq").option("nameserver", rmq.namesrv).option("topic", "order-events")
    assert events.load().count() == 4  # streamed on exactly once
