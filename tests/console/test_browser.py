"""The console in a real browser: Debian's headless Chromium driven by Playwright, against the package's
standalone with real traffic. Pages render without errors or CSP violations, lag shows right, a hostile body
found by key is shown as text, a DLQ resend reaches the consumer, login and CSRF protection hold."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from rocketq import Message, Producer
from tests.console.conftest import (
    ConsoleApi,
    Received,
    chromium_or_skip,
    consumer,
    lagging_group,
    new_topic,
    wait_until,
)
from tests.helpers.procs import free_port
from tests.interop.standalone import Standalone, unique

NAV_PAGES = {
    "dashboard": "Dashboard",
    "cluster": "Cluster",
    "topics": "Topics",
    "consumers": "Consumers",
    "producers": "Producers",
    "messages": "Messages",
    "trace": "Message trace",
    "dlq": "Dead-letter queue",
    "acl": "ACL",
    "api": "API",
}
WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium_or_skip()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox"] if os.geteuid() == 0 else [])
        yield b
        b.close()


class Watched:
    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.add_init_script(WATCH)

    def clean(self) -> None:
        csp = self.page.evaluate("window.__csp")
        assert not self.errors and not csp and not self.dialogs, (self.errors, csp, self.dialogs)


@pytest.fixture
def w(browser: Browser) -> Iterator[Watched]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    ctx.set_default_timeout(20_000)
    yield Watched(ctx.new_page())
    ctx.close()


def test_home_reaches_every_page_and_each_renders(sa: Standalone, w: Watched, producer: Producer) -> None:
    topic, group, _ = lagging_group(sa, producer, queues=2)
    page = w.page
    page.goto(sa.console + "/")
    expect(page.locator("#nav a")).to_have_count(len(NAV_PAGES))
    for key, title in NAV_PAGES.items():  # one click from home
        page.goto(sa.console + "/")
        page.locator(f'#nav a[data-page="{key}"]').click()
        expect(page.locator("main h1")).to_contain_text(title)
        expect(page.locator(f'#nav a[data-page="{key}"]')).to_have_class("active")
    # detail pages: two clicks (the list, then the item)
    page.goto(sa.console + "/")
    page.locator('#nav a[data-page="topics"]').click()
    page.get_by_role("link", name=topic, exact=True).click()
    expect(page.locator("#topic-name")).to_have_text(topic)
    page.locator('#nav a[data-page="consumers"]').click()
    page.get_by_role("link", name=group, exact=True).click()
    expect(page.locator("#group-name")).to_have_text(group)
    page.goto(sa.console + "/#/cluster")
    page.get_by_role("button", name="Config").first.click()
    expect(page.locator("dialog")).to_contain_text("brokerClusterName")
    w.clean()


def test_topic_and_group_pages_show_the_lag(sa: Standalone, w: Watched, producer: Producer) -> None:
    topic, group, lag = lagging_group(sa, producer)
    page = w.page
    page.goto(sa.console + "/#/consumers")
    row = page.locator(f'tr[data-group="{group}"]')
    expect(row).to_contain_text("OFFLINE")
    expect(row.locator("td").nth(4)).to_have_text(str(lag))  # the Lag column
    row.get_by_role("link", name=group).click()
    expect(page.locator("#stat-lag .v")).to_have_text(str(lag))
    expect(page.locator("#progress tfoot")).to_contain_text(str(lag))
    expect(page.locator("#progress tbody tr")).to_have_count(5)  # 4 queues + the group's retry queue
    page.goto(sa.console + f"/#/topic/{topic}")
    consumers = page.locator("#topic-consumers")
    expect(consumers).to_contain_text(group)
    expect(consumers.locator("tbody tr td").nth(3)).to_have_text(str(lag))
    # skip the backlog from the group's page: a job with its progress, then no lag
    page.goto(sa.console + f"/#/consumer/{group}")
    page.get_by_role("button", name="Skip backlog").click()
    page.locator("dialog").get_by_role("button", name="Skip backlog").click()
    job = page.locator("dialog[data-job]")
    expect(job.locator(".badge")).to_have_text("done")
    expect(job.locator(".log")).to_contain_text(f"{topic} broker-a queue 3")
    job.get_by_role("button", name="Close").click()
    page.reload()
    expect(page.locator("#stat-lag .v")).to_have_text("0")
    w.clean()


def test_message_found_by_key_shows_its_body_as_text(
    sa: Standalone, w: Watched, api: ConsoleApi, producer: Producer
) -> None:
    topic = new_topic(sa.namesrv, 2, prefix="Xss")
    body = '<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=2</script>'
    key = unique("XSS")
    producer.send(
        Message(
            topic, body.encode(), keys=[key], tags="<b>t</b>", properties={"evil": "<svg onload=alert(3)>"}
        )
    )
    wait_until(lambda: api.get("/api/messages/by-key", topic=topic, key=key)["messages"], what="key indexed")
    page = w.page
    page.goto(sa.console + "/#/messages")
    page.locator('[data-tab="key"]').click()
    page.locator('#search-key input[name="topic"]').fill(topic)
    page.locator('#search-key input[name="key"]').fill(key)
    page.locator("#search-key button[type=submit]").click()
    result = page.locator("#results tbody tr")
    expect(result).to_have_count(1)
    expect(result.locator(".body-preview")).to_have_text(body)
    result.get_by_role("link").first.click()
    expect(page.locator("#message-body")).to_have_text(body)
    expect(page.locator("#properties")).to_contain_text("<svg onload=alert(3)>")
    expect(page.locator("main h1")).to_be_visible()
    assert page.locator("main img, main script, main svg").count() == 0
    assert page.evaluate("window.__xss") is None
    w.clean()  # no dialog opened, no CSP violation (nothing tried to run)


def test_dlq_resend_delivers_the_message_to_the_consumer(
    sa: Standalone, w: Watched, api: ConsoleApi, producer: Producer
) -> None:
    topic = new_topic(sa.namesrv, 2, prefix="Dlq")
    group = unique("dlq_cg")
    poisoned = {"on": True}
    got = Received(fail=lambda m: poisoned["on"] and m.body == b"poison")
    c = consumer(sa, group, topic, got, max_reconsume_times=1)
    try:
        producer.send(Message(topic, b"fine"))
        r = producer.send(Message(topic, b"poison", keys=["P-1"]))
        got.wait_for(lambda ms: any(m.body == b"fine" for m in ms))
        dead = wait_until(
            lambda: api.get("/api/dlq", group=group)["messages"], timeout=40, what="the message in the DLQ"
        )
        assert dead[0]["msgId"] != "" and dead[0]["originTopic"] == topic and dead[0]["keys"] == "P-1"
        poisoned["on"] = False
        page = w.page
        page.goto(sa.console + f"/#/dlq?group={group}")
        rows = page.locator("#dlq-results tbody tr")
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("poison")
        rows.locator("button[data-resend]").click()
        expect(page.locator("dialog[data-job] .badge")).to_have_text("done")
        msgs = got.wait_for(lambda ms: any(m.body == b"poison" for m in ms), timeout=30)
        again = next(m for m in msgs if m.body == b"poison")
        assert again.topic == topic and "P-1" in again.keys
        assert again.properties.get("ORIGIN_MESSAGE_ID") in (r.msg_id, dead[0]["msgId"])
        page.locator("dialog[data-job]").get_by_role("button", name="Close").click()
        export = page.locator("#export")
        with page.expect_download() as dl:
            export.click()
        text = Path(dl.value.path()).read_text(encoding="utf-8")
        assert '"body": "poison"' in text
        w.clean()
    finally:
        c.shutdown()


class _Attacker(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *a: Any) -> None:
        pass


def test_login_and_cross_site_requests_in_the_browser(
    sa: Standalone, login_console: Any, browser: Browser, producer: Producer
) -> None:
    base = f"http://127.0.0.1:{login_console.port}"
    ctx = browser.new_context()
    ctx.set_default_timeout(20_000)
    try:
        w = Watched(ctx.new_page())
        page = w.page
        page.goto(base + "/#/consumers")
        expect(page).to_have_url(base + "/#/login")
        expect(page.locator("#nav a")).to_have_count(0)  # nothing but the login form before a login
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", "wrong")
        page.click("#login-form button")
        expect(page.locator("#login-error")).to_contain_text("wrong user name or password")
        page.fill("input[name=password]", "s3cret-admin")
        page.click("#login-form button")
        expect(page.locator("main h1")).to_have_text("Dashboard")
        expect(page.locator("#who")).to_contain_text("admin")
        # the page's own script without the token: refused
        status = page.evaluate(
            "fetch('/api/consumers', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({group: 'csrf_from_script'})}).then(r => r.status)"
        )
        assert status == 403
        # another origin's page posting a form at the console, in the logged-in browser
        group = unique("csrf_cg")
        _Attacker.page = (
            f'<form id=f method=POST enctype="text/plain" action="{base}/api/consumers">'
            f'<input name=\'{{"group":"{group}","clusterName":"DefaultCluster","x":"\' value=\'"}}\'></form>'
            "<script>document.getElementById('f').submit()</script>"
        ).encode()
        port = free_port()
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Attacker)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            evil = ctx.new_page()
            evil.goto(f"http://127.0.0.1:{port}/")
            evil.wait_for_url(f"{base}/api/consumers")
            assert "login required" in evil.content() or "CSRF" in evil.content()
            evil.close()
        finally:
            srv.shutdown()
        groups = page.evaluate("fetch('/api/consumers').then(r => r.json())")["groups"]
        assert group not in {g["group"] for g in groups}
        page.click("#logout")
        expect(page).to_have_url(base + "/#/login")
    finally:
        ctx.close()
