"""Screenshots of the console's main pages for docs/console.md (docs/img/console-*.png).

    .venv/bin/python scripts/console_screenshots.py [OUT_DIR]

Starts a `rocketq standalone` (no console) and a `rocketq console` sampling every 2 s, on free 127.0.0.1
ports in a temp dir; sends traffic with the rocketq client (topics of several types, a group with lag, a
dead-lettered message, a traced message), then photographs each page with Debian's headless Chromium.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from rocketq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer
from rocketq.admin import MQAdminExt, TopicConfig

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], line: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "rocketq.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert p.stdout is not None
    for out in p.stdout:
        if line in out:
            threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()  # type: ignore[union-attr]
            return p
    raise RuntimeError(f"{args[0]} did not start")


def traffic(ns: str, stop: threading.Event) -> None:
    with MQAdminExt(ns) as admin:
        masters = admin.master_addrs()
        for topic, mtype, q in (("OrderEvents", "NORMAL", 4), ("PaymentEvents", "FIFO", 4),
                                ("InventorySync", "NORMAL", 2), ("ShipmentDelays", "DELAY", 2)):  # fmt: skip
            for addr in masters.values():
                admin.create_topic(
                    addr, TopicConfig(topic, q, q, order=mtype == "FIFO"), f"+message.type={mtype}"
                )
    time.sleep(1.5)
    p = Producer("order-service-producer", namesrv=ns, enable_msg_trace=True)
    p.start()
    for i in range(40):
        p.send(Message("OrderEvents", f'{{"orderId": {1000 + i}, "amount": {19.9 + i}}}'.encode(),
                       tags="created", keys=[f"ORDER-{1000 + i}"]))  # fmt: skip
    p.send(
        Message(
            "OrderEvents", b'{"orderId": 4242, "note": "<img src=x onerror=alert(1)>"}', keys=["ORDER-4242"]
        )
    )

    def fail_poison(msgs):  # one poisoned message goes to the DLQ after its retries
        return (
            ConsumeResult.RECONSUME_LATER if any(m.body == b"poison" for m in msgs) else ConsumeResult.SUCCESS
        )

    billing = PushConsumer("billing-service", namesrv=ns, max_reconsume_times=1, enable_msg_trace=True,
                           consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    billing.subscribe("OrderEvents", "*")
    billing.register_listener(fail_poison)
    billing.start()
    audit = PushConsumer(
        "audit-service", namesrv=ns, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    audit.subscribe("PaymentEvents", "*")
    audit.register_listener(lambda msgs: ConsumeResult.SUCCESS)
    audit.start()
    p.send(Message("OrderEvents", b"poison", tags="created", keys=["ORDER-POISON"]))
    time.sleep(3)
    audit.shutdown()  # stopped: PaymentEvents backlog builds up below
    t0 = time.time()
    i = 0
    while not stop.is_set():
        rate = 30 + 25 * math.sin((time.time() - t0) / 6)
        p.send(
            Message(
                "OrderEvents",
                f'{{"orderId": {2000 + i}}}'.encode(),
                tags="created",
                keys=[f"ORDER-{2000 + i}"],
            )
        )
        if i % 3 == 0:
            p.send(Message("PaymentEvents", f"payment {i}".encode(), tags="paid", keys=[f"PAY-{i}"]))
        if i % 5 == 0:
            p.send(Message("InventorySync", f"sku {i % 50}".encode()))
        i += 1
        time.sleep(1 / max(rate, 1))
    billing.shutdown()
    p.shutdown()


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rq-shots-") as tmp:
        conf = Path(tmp, "broker.conf")
        conf.write_text("messageDelayLevel=" + " ".join(["1s"] * 18) + "\nmapedFileSizeCommitLog=67108864\n"
                        "maxHashSlotNum=50000\nmaxIndexNum=200000\ndiskMaxUsedSpaceRatio=99\n")  # fmt: skip
        nsp, bp, cp = free_port(), free_port(), free_port()
        sa = start(["standalone", "--no-console", "--home", tmp, "--namesrv-port", str(nsp),
                    "--broker-port", str(bp), "-c", str(conf)], "The broker[")  # fmt: skip
        ns = f"127.0.0.1:{nsp}"
        console = start(["console", "-n", ns, "--port", str(cp), "--collect-interval", "2", "--home", tmp],
                        "The console boot success")  # fmt: skip
        stop = threading.Event()
        t = threading.Thread(target=traffic, args=(ns, stop), daemon=True)
        t.start()
        try:
            time.sleep(45)  # two dozen dashboard samples
            base = f"http://127.0.0.1:{cp}"
            with sync_playwright() as pw:
                args = ["--no-sandbox"] if os.geteuid() == 0 else []
                b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=args)
                page = b.new_page(viewport={"width": 1360, "height": 860})

                def shot(name: str, route: str, wait: str = "main h1", full: bool = False) -> None:
                    page.goto(f"{base}/#/{route}")
                    page.wait_for_selector(wait)
                    page.wait_for_timeout(1200)
                    page.screenshot(path=str(out / f"console-{name}.png"), full_page=full)

                shot("dashboard", "dashboard", ".u-title")
                shot("cluster", "cluster")
                shot("topics", "topics", "tbody tr")
                shot("topic", "topic/OrderEvents", "#topic-consumers")
                shot("consumers", "consumers", "tr[data-group]")
                shot("consumer", "consumer/audit-service", "#progress")
                page.goto(f"{base}/#/messages?by=key&topic=OrderEvents&key=ORDER-4242")
                page.wait_for_selector("#search-key")
                page.click("#search-key button[type=submit]")
                page.click("#results tbody a")
                page.wait_for_selector("#message-body")
                page.wait_for_timeout(800)
                page.screenshot(path=str(out / "console-message.png"), full_page=True)
                trace_link = page.locator("a", has_text="Message trace")
                trace_link.last.click()
                page.wait_for_selector(".timeline")
                page.wait_for_timeout(800)
                page.screenshot(path=str(out / "console-trace.png"))
                shot("dlq", "dlq?group=billing-service", "#dlq-results tbody tr")
                b.close()
        finally:
            stop.set()
            t.join(20)
            for p in (console, sa):
                p.terminate()
                p.wait(20)
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
